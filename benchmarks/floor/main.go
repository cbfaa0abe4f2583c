// The floor of a mutating admission webhook, for benchmarks/admission_latency.py: Go's standard
// library only, TLS on loopback (HTTP/1.1 and HTTP/2, as net/http serves by default), and no
// work beyond reading the review's uid.
//
//	/allow  answers every AdmissionReview allowed, with no patch (mode floor);
//	/patch  answers allowed with the JSON Patch and warnings read from -patch at start, verbatim
//	        (mode floor-patch: what a parity-sized mutation costs the API server through any
//	        webhook, the webhook's own work at about zero).
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"os"
)

type review struct {
	Request struct {
		UID string `json:"uid"`
	} `json:"request"`
}

type response struct {
	UID       string   `json:"uid"`
	Allowed   bool     `json:"allowed"`
	PatchType string   `json:"patchType,omitempty"`
	Patch     []byte   `json:"patch,omitempty"` // encoding/json writes []byte as base64
	Warnings  []string `json:"warnings,omitempty"`
}

type answer struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Response   response `json:"response"`
}

// canned is the answer of /patch: the JSON Patch itself (not base64) and the warnings.
type canned struct {
	Patch    json.RawMessage `json:"patch"`
	Warnings []string        `json:"warnings"`
}

func handler(template response) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in review
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out := answer{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview", Response: template}
		out.Response.UID = in.Request.UID
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(out); err != nil {
			log.Print(err)
		}
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	cert := flag.String("cert", "", "TLS certificate (PEM)")
	key := flag.String("key", "", "TLS key (PEM)")
	patchFile := flag.String("patch", "", `JSON {"patch": [...], "warnings": [...]} for /patch`)
	flag.Parse()

	patched := response{Allowed: true}
	if *patchFile != "" {
		raw, err := os.ReadFile(*patchFile)
		if err != nil {
			log.Fatal(err)
		}
		var c canned
		if err := json.Unmarshal(raw, &c); err != nil {
			log.Fatal(err)
		}
		if len(c.Patch) > 0 && string(c.Patch) != "null" {
			patched.PatchType = "JSONPatch"
			patched.Patch = c.Patch
		}
		patched.Warnings = c.Warnings
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/allow", handler(response{Allowed: true}))
	mux.HandleFunc("/patch", handler(patched))
	log.Printf("serving on %s", *addr)
	log.Fatal(http.ListenAndServeTLS(*addr, *cert, *key, mux))
}
