// A registration endpoint that receives ProfileEscrow replays (docs/replay.md). Go standard library only.
//
//	PROFILE_ESCROW_WEBHOOK_SECRET=whsec_... PORT=8000 go run receiver.go
//
// PROFILE_ESCROW_WEBHOOK_SECRET holds one or more whsec_ secrets, space-separated (several during a
// rotation). Answers 401 when the Standard Webhooks signature or timestamp does not check out, 200
// after registering. It registers nobody: put your registration where the comment says.
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	tolerance = 5 * 60    // seconds between webhook-timestamp and this machine's clock, either way
	maxBody   = 64 * 1024 // a replay body is a few hundred bytes
)

// loadKeys returns the HMAC keys of `whsec_<base64>` secrets, space-separated.
func loadKeys(text string) [][]byte {
	var keys [][]byte
	for _, secret := range strings.Fields(text) {
		if !strings.HasPrefix(secret, "whsec_") {
			log.Fatal("PROFILE_ESCROW_WEBHOOK_SECRET: every secret must start with whsec_")
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			log.Fatal("PROFILE_ESCROW_WEBHOOK_SECRET: not valid base64 after whsec_")
		}
		if len(key) < 16 || len(key) > 64 {
			log.Fatal("PROFILE_ESCROW_WEBHOOK_SECRET: a secret must decode to 16 to 64 bytes")
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		log.Fatal("set PROFILE_ESCROW_WEBHOOK_SECRET to whsec_<base64> (several: space-separated)")
	}
	return keys
}

// verified says whether any `v1,` signature matches any key, over `<id>.<timestamp>.<body>`, and
// the timestamp is fresh.
func verified(keys [][]byte, header http.Header, body []byte) bool {
	id := header.Get("webhook-id")
	timestamp := header.Get("webhook-timestamp")
	seconds, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || timestamp == "" || timestamp[0] < '0' || timestamp[0] > '9' {
		return false
	}
	if age := time.Now().Unix() - seconds; age > tolerance || age < -tolerance {
		return false
	}
	var given [][]byte
	for _, entry := range strings.Split(header.Get("webhook-signature"), " ") {
		if strings.HasPrefix(entry, "v1,") {
			given = append(given, []byte(entry[3:]))
		}
	}
	match := false
	for _, key := range keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + timestamp + "."))
		mac.Write(body)
		expected := []byte(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
		for _, signature := range given {
			if hmac.Equal(signature, expected) { // constant time
				match = true
			}
		}
	}
	return match
}

func main() {
	keys := loadKeys(os.Getenv("PROFILE_ESCROW_WEBHOOK_SECRET"))
	port := os.Getenv("PORT")
	if port == "" {
		port = "8000"
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody)) // the raw bytes: verify before parsing
		if err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		if !verified(keys, r.Header, body) {
			w.WriteHeader(http.StatusUnauthorized) // retried by ProfileEscrow: a secret mismatch loses nothing
			return
		}
		// Verified. Register the user from json.Unmarshal(body, …) here, idempotently by the
		// Idempotency-Key header (= escrowId): answer 200 when registered, 409 if the user already
		// exists, 503 to be asked again later; 400/410/422 only if it can never be registered
		// (ProfileEscrow then gives the profile up for good).
		w.WriteHeader(http.StatusOK)
	})
	address := "127.0.0.1:" + port
	fmt.Println("listening on " + address)
	log.Fatal(http.ListenAndServe(address, nil))
}
