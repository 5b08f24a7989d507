// Command gendict trains the zstd dictionary the raw store compresses
// GitHub deliveries with (docs/design.md §14), from the payload examples
// of testdata/github, cut as the store cuts them: each body's rest (its
// shared objects taken out, spans.Find) and, with -objects, each shared
// object (stored once per shard, they matter little per delivery: the
// default trains on the rests only, which held-out event families
// compress 4 % smaller with, at -hash 8).
//
// The example `wakegate bench ingest` sends (octokit
// pull_request/opened) is left out, so the bench measures the dictionary
// on a body it was not trained on. Run from delivery/ingest:
//
//	go run ./internal/gendict -o github-<id>.zdict -id <id>
//
// Training is not deterministic (the same examples give another
// dictionary), and records name their dictionary by id: a new dictionary
// needs a new -id, and the old one stays embedded and registered with the
// decoder while records written with it are retained. gendict refuses to
// replace a dictionary file that holds the same id.
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"

	"github.com/wakegate/wakegate/delivery/ingest/internal/spans"
)

func main() {
	in := flag.String("in", "../../testdata/github", "folder of GitHub payload examples (*.json)")
	out := flag.String("o", "github-57470002.zdict", "dictionary file to write")
	exclude := flag.String("exclude", "octokit/pull_request/opened.payload.json", "comma-separated examples (relative to -in) left out")
	id := flag.Uint("id", 0x57470002, "zstd dictionary id")
	hashBytes := flag.Int("hash", 8, "bytes hashed to find repeated content (4–8)")
	withObjects := flag.Bool("objects", false, "train on the shared objects too, not only the rests")
	size := flag.Int("size", 16<<10, "largest dictionary size, bytes")
	flag.Parse()

	skip := map[string]bool{}
	for _, e := range strings.Split(*exclude, ",") {
		skip[filepath.ToSlash(strings.TrimSpace(e))] = true
	}
	var files []string
	err := filepath.WalkDir(*in, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		rel, _ := filepath.Rel(*in, p)
		if !skip[filepath.ToSlash(rel)] {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		log.Fatalf("gendict: %v", err)
	}
	sort.Strings(files) // the same dictionary from the same examples
	var samples [][]byte
	seen := map[string]bool{}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			log.Fatalf("gendict: %v", err)
		}
		prev := 0
		var rest []byte
		for _, sp := range spans.Find(body) {
			rest = append(rest, body[prev:sp.Start]...)
			if o := string(body[sp.Start:sp.End]); *withObjects && !seen[o] {
				seen[o] = true
				samples = append(samples, []byte(o))
			}
			prev = sp.End
		}
		samples = append(samples, append(rest, body[prev:]...))
	}
	if old, err := os.ReadFile(*out); err == nil {
		if info, err := zstd.InspectDictionary(old); err == nil && info.ID() == uint32(*id) {
			log.Fatalf("gendict: %s already holds dictionary %#x: a new dictionary needs a new -id", *out, *id)
		}
	}
	d, err := dict.BuildZstdDict(samples, dict.Options{MaxDictSize: *size, HashBytes: *hashBytes, ZstdDictID: uint32(*id), ZstdLevel: zstd.SpeedFastest})
	if err != nil {
		log.Fatalf("gendict: build: %v", err)
	}
	if err := os.WriteFile(*out, d, 0o644); err != nil {
		log.Fatalf("gendict: %v", err)
	}
	fmt.Printf("gendict: %d examples, %d samples: %s, %d bytes, id %#x\n", len(files), len(samples), *out, len(d), *id)
}
