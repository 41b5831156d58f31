# Sourced by the benchmark scripts: an instant backend for deliveries, nginx answering 200 to every request on
# 127.0.0.1:<port>, its files in <folder>. nginx, like wrk, is installed when missing.
#   instant_backend_start <folder> <port>
#   instant_backend_stop <folder>          (in the script's cleanup; quiet when it was never started)
command -v nginx >/dev/null || apt-get install -y -qq nginx-light >/dev/null

instant_backend_start() {
    local folder=$1 port=$2
    cat > "$folder/nginx.conf" <<CONF
worker_processes 1;
pid $folder/nginx.pid;
error_log $folder/nginx-error.log;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $folder/body;
    server { listen 127.0.0.1:$port; keepalive_requests 1000000; location / { return 200; } }
}
CONF
    nginx -c "$folder/nginx.conf" -p "$folder"
}

instant_backend_stop() {
    [ -f "$1/nginx.conf" ] && nginx -c "$1/nginx.conf" -p "$1" -s stop 2>/dev/null
    return 0
}
