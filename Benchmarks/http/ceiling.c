// The crypto ceiling of a capture, in C: on every core, a fresh X25519 key pair and two sealed boxes (the
// padded profile to the escrow's key, the escrow's secret key to the master key), nothing else. What no capture
// path can beat on this machine; Benchmarks/http/capture-vs-ceiling.sh runs it beside the HTTP capture.
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double seconds;
static unsigned char master_public[crypto_box_PUBLICKEYBYTES];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *work(void *count) {
    unsigned char public_key[crypto_box_PUBLICKEYBYTES], secret_key[crypto_box_SECRETKEYBYTES];
    unsigned char profile[256] = {0x61}, sealed_profile[256 + crypto_box_SEALBYTES];
    unsigned char sealed_key[crypto_box_SECRETKEYBYTES + crypto_box_SEALBYTES];
    double end = now() + seconds;
    long done = 0;
    while (now() < end) {
        crypto_box_keypair(public_key, secret_key);
        crypto_box_seal(sealed_profile, profile, sizeof profile, public_key);
        crypto_box_seal(sealed_key, secret_key, sizeof secret_key, master_public);
        done++;
    }
    *(long *)count = done;
    return NULL;
}

int main(int argc, char **argv) {
    seconds = argc > 1 ? atof(argv[1]) : 5;
    if (sodium_init() < 0) return 2;
    unsigned char master_secret[crypto_box_SECRETKEYBYTES];
    crypto_box_keypair(master_public, master_secret);
    long cores = sysconf(_SC_NPROCESSORS_ONLN), total = 0;
    pthread_t threads[64];
    long counts[64] = {0};
    for (long i = 0; i < cores && i < 64; i++) pthread_create(&threads[i], NULL, work, &counts[i]);
    for (long i = 0; i < cores && i < 64; i++) { pthread_join(threads[i], NULL); total += counts[i]; }
    printf("%.0f\n", total / seconds);
    return 0;
}
