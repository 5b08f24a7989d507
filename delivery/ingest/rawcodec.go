package ingest

import (
	"crypto/sha256"
	_ "embed" // the compression dictionary
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wakegate/wakegate/delivery/ingest/internal/spans"

	"github.com/wakegate/wakegate/delivery/keyspace"
)

// Raw records (docs/design.md §14). Three formats are read:
//
//	v1 (before): uvarint(len(meta)) · meta JSON · zstd(body)
//	v2:          0x00 0x02 · uvarint(dictionary id, 0 = none) ·
//	             meta (event, content type, repo, workspace, ignored as
//	             uvarint-length strings; uvarint received unix ms) ·
//	             uvarint(n) · n × 16-byte object hashes ·
//	             uvarint(m) · m × (uvarint position delta, uvarint object index) ·
//	             zstd(rest)
//	v3 (written): 0x00 0x03 · uvarint(dictionary id) · event and content
//	             type each as a token (1 byte: k ≥ 1 is knownEvents[k-1] or
//	             knownTypes[k-1], 0 a uvarint-length string follows) ·
//	             repo, workspace, ignored and received as in v2 ·
//	             uvarint(n) · (n ≤ 1: n × 16-byte object hashes; n ≥ 2: the
//	             16-byte hash of the object list, a shared object whose
//	             bytes are the n hashes) · refs as in v2 ·
//	             zstd(rest) without the frame's 4-byte magic number
//
// v1's first byte is never 0 (its meta JSON is at least "{}"). In v2 and
// v3 the GUID and hook are the key's, not repeated in the value; "rest" is the
// body with the spans of its shared objects (findSpans) cut out, and each
// object is stored once per ingest shard under objKey, zstd-compressed
// with the same dictionary. Positions are offsets into rest where the
// objects go back, in order: the body comes back byte for byte.

// knownEvents and knownTypes are the tokens of v3 records: append only
// (a record names an entry by its position).
var (
	knownEvents = [...]string{"pull_request", "pull_request_review", "pull_request_review_comment",
		"pull_request_review_thread", "check_run", "check_suite", "status", "workflow_run", "workflow_job",
		"issue_comment", "issues", "push", "ping", "installation", "installation_repositories",
		"merge_group", "deployment_status", "deployment", "create", "delete", "release"}
	knownTypes = [...]string{"application/json", "application/x-www-form-urlencoded"}
)

// zstdMagic starts every zstd frame; v3 records leave it out.
var zstdMagic = [4]byte{0x28, 0xb5, 0x2f, 0xfd}

// githubDict is the zstd dictionary new records are written with,
// trained on the GitHub payload examples of testdata/github (`cd
// delivery/ingest && go run ./internal/gendict -o github-<id>.zdict -id
// <id>`, which refuses to replace a dictionary under its id: training is
// not deterministic): the rests of every example but the one `wakegate
// bench ingest` sends, cut as they are stored. Its id is in every v2 and
// v3 record (and zstd frame): a new dictionary gets a new id, and the old
// ones stay registered with the decoder for as long as records written
// with them are retained (oldDicts).
//
//go:embed github-57470002.zdict
var githubDict []byte

// dictID is githubDict's id, the one written in new records.
const dictID = 0x57470002

// githubDict1 is the dictionary v2 records and the objects stored with
// them were written with (id 0x57470001, trained on rests and objects):
// read only.
//
//go:embed github.zdict
var githubDict1 []byte

const objHashLen = 16

// The raw body is compressed on the request path, before the commit, so
// what is durable at the 2xx is already the compact record (docs/design.md
// §1). SpeedFastest: its match table is 256 KB, where SpeedDefault's two are
// 1.25 MB and miss the cache between requests, and with the dictionary the
// bytes differ little. One encoder per P, so concurrent requests do not
// queue for a single encoder. No frame checksum (an xxhash on both sides,
// and 4 bytes): Redis keeps the record intact, and records written with one
// still decode (the checksum is checked when present).
var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(min(runtime.GOMAXPROCS(0), 16)), zstd.WithEncoderCRC(false),
		zstd.WithEncoderDict(githubDict))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(64<<20),
		zstd.WithDecoderDicts(githubDict, githubDict1))
)

func init() {
	for _, d := range []struct {
		b  []byte
		id uint32
	}{{githubDict, dictID}, {githubDict1, 0x57470001}} {
		if id, err := zstd.InspectDictionary(d.b); err != nil || id.ID() != d.id {
			panic(fmt.Sprintf("ingest: an embedded dictionary is not dictionary %#x (%v)", d.id, err))
		}
	}
}

// object is a shared object of a body: its hash and its bytes.
type object struct {
	sum  [objHashLen]byte
	data []byte
}

func (o object) hex() string { return hex.EncodeToString(o.sum[:]) }

// objKey is the object store's key of an object in an ingest shard.
func objKey(tag, sumHex string) string { return keyspace.IngestShard(tag).Object(sumHex) }

// splitBody cuts the shared objects out of body: the rest, the distinct
// objects, and where each span goes back (position in rest, object index).
func splitBody(body []byte, rest []byte) ([]byte, []object, [][2]int) {
	sps := spans.Find(body)
	if len(sps) == 0 {
		return append(rest, body...), nil, nil
	}
	var objs []object
	refs := make([][2]int, 0, len(sps))
	prev := 0
	for _, sp := range sps {
		rest = append(rest, body[prev:sp.Start]...)
		data := body[sp.Start:sp.End]
		idx := -1
		for k, o := range objs {
			if string(o.data) == string(data) {
				idx = k
				break
			}
		}
		if idx < 0 {
			objs = append(objs, object{sum: hashes.sum(data), data: data})
			idx = len(objs) - 1
		}
		refs = append(refs, [2]int{len(rest), idx})
		prev = sp.End
	}
	return append(rest, body[prev:]...), objs, refs
}

// encodeRaw appends d's v3 record to out and returns the shared objects
// it references (their data aliasing d.Body; the last one the object
// list, when there is one) and the body's marker (bodyMark).
func encodeRaw(d *Delivery, out []byte) ([]byte, []object, [objHashLen]byte, error) {
	restBuf := restPool.Get().(*[]byte)
	defer restPool.Put(restBuf)
	rest, objs, refs := splitBody(d.Body, (*restBuf)[:0])
	if cap(rest) <= maxPooledRec {
		*restBuf = rest[:0]
	}
	mark := bodyMark(d.Repo, len(d.Body), rest, objs, refs) // before the list joins objs
	if need := 96 + len(d.Repo) + len(d.Workspace) + len(d.Ignored) + len(objs)*objHashLen + len(refs)*4 + len(rest)/6; cap(out) < need {
		out = make([]byte, 0, need)
	}
	out = append(out, 0, 3)
	out = binary.AppendUvarint(out, dictID)
	out = appendToken(out, d.Event, knownEvents[:])
	out = appendToken(out, d.ContentType, knownTypes[:])
	for _, s := range [...]string{d.Repo, d.Workspace, d.Ignored} {
		out = binary.AppendUvarint(out, uint64(len(s)))
		out = append(out, s...)
	}
	out = binary.AppendUvarint(out, uint64(d.Received.UnixMilli()))
	out = binary.AppendUvarint(out, uint64(len(objs)))
	if len(objs) >= 2 {
		// the deliveries about a repository come with the same few
		// objects: their list is a shared object too, 16 bytes a record
		// instead of 16 an object
		list := make([]byte, 0, len(objs)*objHashLen)
		for _, o := range objs {
			list = append(list, o.sum[:]...)
		}
		full := sha256.Sum256(list)
		objs = append(objs, object{sum: [objHashLen]byte(full[:objHashLen]), data: list})
		out = append(out, full[:objHashLen]...)
	} else {
		for _, o := range objs {
			out = append(out, o.sum[:]...)
		}
	}
	out = binary.AppendUvarint(out, uint64(len(refs)))
	prev := 0
	for _, r := range refs {
		out = binary.AppendUvarint(out, uint64(r[0]-prev))
		out = binary.AppendUvarint(out, uint64(r[1]))
		prev = r[0]
	}
	n := len(out)
	out = zenc.EncodeAll(rest, out)
	if string(out[n:n+len(zstdMagic)]) != string(zstdMagic[:]) {
		return nil, nil, mark, errors.New("raw record: zstd frame without its magic number")
	}
	return append(out[:n], out[n+len(zstdMagic):]...), objs, mark, nil
}

// appendToken appends s as a v3 token: its position in known plus one, or
// 0 and s as a uvarint-length string.
func appendToken(out []byte, s string, known []string) []byte {
	for i, k := range known {
		if s == k {
			return append(out, byte(i+1))
		}
	}
	out = append(out, 0)
	out = binary.AppendUvarint(out, uint64(len(s)))
	return append(out, s...)
}

// bodyMark is the body marker's hash (docs/design.md §3, §14): SHA-256 of
// the repository and the body as it is stored — the objects' hashes, where
// each goes back and the rest — which names the body as surely as hashing
// the body itself (the objects' hashes are SHA-256 of their bytes, and the
// split is a function of the body), while hashing the rest's 3.7 KB
// instead of the body's 28 KB: the objects' hashes are the ones
// splitBody has (remembered by hashes for objects seen lately). A
// different split of the same body (a change to spans.Find) gives another
// marker: such a change is a marker format change (MarkerEpoch).
func bodyMark(repo string, bodyLen int, rest []byte, objs []object, refs [][2]int) [objHashLen]byte {
	var hdr [256]byte
	b := append(hdr[:0], "wg-bs1"...)
	b = binary.AppendUvarint(b, uint64(len(repo)))
	h := sha256.New()
	h.Write(b)
	h.Write([]byte(repo))
	b = binary.AppendUvarint(hdr[:0], uint64(bodyLen))
	b = binary.AppendUvarint(b, uint64(len(objs)))
	for _, o := range objs {
		if len(b)+objHashLen > cap(hdr) {
			h.Write(b)
			b = hdr[:0]
		}
		b = append(b, o.sum[:]...)
	}
	b = binary.AppendUvarint(b, uint64(len(refs)))
	for _, r := range refs {
		if len(b)+2*binary.MaxVarintLen64 > cap(hdr) {
			h.Write(b)
			b = hdr[:0]
		}
		b = binary.AppendUvarint(b, uint64(r[0]))
		b = binary.AppendUvarint(b, uint64(r[1]))
	}
	h.Write(b)
	h.Write(rest)
	var full [sha256.Size]byte
	h.Sum(full[:0])
	return [objHashLen]byte(full[:objHashLen])
}

// encodeObject is an object as the object store keeps it: a zstd frame
// (with the dictionary's id in its header).
func encodeObject(data []byte) []byte { return zenc.EncodeAll(data, nil) }

// rawRecord is a decoded raw record whose body may still lack its objects.
type rawRecord struct {
	d    *Delivery
	rest []byte // v2: the body without its objects (pooled in d.buf)
	objs [][objHashLen]byte
	refs [][2]int
	// v3 with two objects or more: the hash of their list and how many
	// (objs is nil until resolveList)
	list  *[objHashLen]byte
	nobjs int
}

// release hands the buffer of a record that will not be assembled back
// (Release).
func (r *rawRecord) release() {
	if r.rest != nil {
		r.d.Body, r.rest = r.rest, nil
	}
	Release([]*Delivery{r.d})
}

// resolveList reads the record's object list from objs (decompressed, by
// hash), when it has one that is not read yet.
func (r *rawRecord) resolveList(objs map[[objHashLen]byte][]byte) error {
	if r.list == nil {
		return nil
	}
	data, ok := objs[*r.list]
	if !ok {
		return fmt.Errorf("object list %x of the raw record: %w", *r.list, ErrNotFound)
	}
	if len(data) != r.nobjs*objHashLen {
		return fmt.Errorf("object list %x of %d bytes for %d objects: %w", *r.list, len(data), r.nobjs, errCorrupt)
	}
	r.objs = make([][objHashLen]byte, r.nobjs)
	for i := range r.objs {
		copy(r.objs[i][:], data[i*objHashLen:])
	}
	r.list = nil
	return nil
}

// decodeRaw decodes a raw record stored under guid and hook. A v2 record
// that references objects comes back with them still to be put in
// (rawRecord.objs, assemble).
func decodeRaw(guid, hook string, v []byte) (*rawRecord, error) {
	if len(v) >= 2 && v[0] == 0 {
		return decodeRawV2(guid, hook, v)
	}
	n, k := binary.Uvarint(v)
	if k <= 0 || uint64(len(v)-k) < n {
		return nil, errors.New("corrupt raw record")
	}
	var m rawMeta
	if err := json.Unmarshal(v[k:k+int(n)], &m); err != nil {
		return nil, fmt.Errorf("corrupt raw record: %w", err)
	}
	buf := bodyPool.Get().(*[]byte)
	body, err := zdec.DecodeAll(v[k+int(n):], (*buf)[:0])
	if err != nil {
		bodyPool.Put(buf)
		return nil, fmt.Errorf("corrupt raw record: %w", err)
	}
	return &rawRecord{d: &Delivery{GUID: m.GUID, Event: m.Event, Hook: m.Hook, ContentType: m.ContentType, Repo: m.Repo,
		Workspace: m.Workspace, Ignored: m.Ignored, Body: body, Received: time.UnixMilli(m.Received).UTC(), buf: buf}}, nil
}

var errCorrupt = errors.New("corrupt raw record")

func decodeRawV2(guid, hook string, v []byte) (*rawRecord, error) {
	format := v[1]
	if format != 2 && format != 3 {
		return nil, fmt.Errorf("raw record format %d: %w", v[1], errCorrupt)
	}
	p := v[2:]
	uv := func() (uint64, bool) {
		x, k := binary.Uvarint(p)
		if k <= 0 {
			return 0, false
		}
		p = p[k:]
		return x, true
	}
	str := func() (string, bool) {
		n, ok := uv()
		if !ok || n > uint64(len(p)) {
			return "", false
		}
		s := string(p[:n])
		p = p[n:]
		return s, true
	}
	if _, ok := uv(); !ok { // dictionary id: the zstd frame names it too
		return nil, errCorrupt
	}
	var fs [5]string
	first := 0
	if format == 3 {
		for i, known := range [...][]string{knownEvents[:], knownTypes[:]} {
			if len(p) == 0 {
				return nil, errCorrupt
			}
			k := int(p[0])
			p = p[1:]
			switch {
			case k > len(known):
				return nil, errCorrupt
			case k > 0:
				fs[i] = known[k-1]
			default:
				s, ok := str()
				if !ok {
					return nil, errCorrupt
				}
				fs[i] = s
			}
		}
		first = 2
	}
	for i := first; i < len(fs); i++ {
		s, ok := str()
		if !ok {
			return nil, errCorrupt
		}
		fs[i] = s
	}
	ms, ok := uv()
	if !ok {
		return nil, errCorrupt
	}
	nobj, ok := uv()
	if !ok || nobj > uint64(len(v)) {
		return nil, errCorrupt
	}
	r := &rawRecord{}
	if format == 3 && nobj >= 2 {
		if len(p) < objHashLen {
			return nil, errCorrupt
		}
		r.list, r.nobjs = new([objHashLen]byte), int(nobj)
		copy(r.list[:], p)
		p = p[objHashLen:]
	} else {
		if nobj*objHashLen > uint64(len(p)) {
			return nil, errCorrupt
		}
		r.objs = make([][objHashLen]byte, nobj)
		for i := range r.objs {
			copy(r.objs[i][:], p[:objHashLen])
			p = p[objHashLen:]
		}
	}
	nref, ok := uv()
	if !ok || nref > uint64(len(p)) {
		return nil, errCorrupt
	}
	r.refs = make([][2]int, nref)
	pos := 0
	for i := range r.refs {
		d, ok1 := uv()
		idx, ok2 := uv()
		if !ok1 || !ok2 || idx >= nobj || d > uint64(len(v))<<8 {
			return nil, errCorrupt
		}
		pos += int(d)
		r.refs[i] = [2]int{pos, int(idx)}
	}
	if format == 3 {
		// the frame without its magic number: put it back
		frame := make([]byte, 0, len(zstdMagic)+len(p))
		p = append(append(frame, zstdMagic[:]...), p...)
	}
	buf := bodyPool.Get().(*[]byte)
	rest, err := zdec.DecodeAll(p, (*buf)[:0])
	if err != nil {
		bodyPool.Put(buf)
		return nil, fmt.Errorf("corrupt raw record: %w", err)
	}
	if len(r.refs) > 0 && r.refs[len(r.refs)-1][0] > len(rest) {
		bodyPool.Put(buf)
		return nil, errCorrupt
	}
	r.d = &Delivery{GUID: guid, Hook: hook, Event: fs[0], ContentType: fs[1], Repo: fs[2], Workspace: fs[3], Ignored: fs[4],
		Received: time.UnixMilli(int64(ms)).UTC(), buf: buf}
	if len(r.refs) == 0 {
		r.d.Body = rest
	} else {
		r.rest = rest
	}
	return r, nil
}

// assemble puts the record's objects back (objs: decompressed, by hash)
// and returns the delivery with its body byte for byte as received.
func (r *rawRecord) assemble(objs map[[objHashLen]byte][]byte) (*Delivery, error) {
	if r.rest == nil {
		return r.d, nil
	}
	if err := r.resolveList(objs); err != nil {
		return nil, err
	}
	n := len(r.rest)
	for _, ref := range r.refs {
		o, ok := objs[r.objs[ref[1]]]
		if !ok {
			return nil, fmt.Errorf("shared object %x of the raw record: %w", r.objs[ref[1]], ErrNotFound)
		}
		n += len(o)
	}
	body := make([]byte, 0, n)
	prev := 0
	for _, ref := range r.refs {
		body = append(body, r.rest[prev:ref[0]]...)
		body = append(body, objs[r.objs[ref[1]]]...)
		prev = ref[0]
	}
	body = append(body, r.rest[prev:]...)
	// the rest's pooled buffer goes back; the body is its own
	*r.d.buf = r.rest[:0]
	bodyPool.Put(r.d.buf)
	r.d.buf, r.rest = nil, nil
	r.d.Body = body
	return r.d, nil
}

// decodeObject decompresses a stored object and checks it is the one its
// hash names.
func decodeObject(sum [objHashLen]byte, v []byte) ([]byte, error) {
	data, err := zdec.DecodeAll(v, nil)
	if err != nil {
		return nil, fmt.Errorf("shared object %x: %w", sum, err)
	}
	full := sha256.Sum256(data)
	if string(full[:objHashLen]) != string(sum[:]) {
		return nil, fmt.Errorf("shared object %x: content does not match its hash: %w", sum, errCorrupt)
	}
	return data, nil
}

// hashes remembers the hashes of objects seen lately, by their bytes: the
// same repository and users come with every delivery about a repository,
// and looking 15 KB up in a map (the runtime's AES hash, then a compare)
// costs a fraction of hashing it with SHA-256 again.
var hashes hashCache

type hashCache struct {
	mu    sync.Mutex
	m     map[string][objHashLen]byte
	bytes int
}

const maxHashCache = 4 << 20

func (c *hashCache) sum(data []byte) [objHashLen]byte {
	c.mu.Lock()
	sum, ok := c.m[string(data)]
	c.mu.Unlock()
	if ok {
		return sum
	}
	full := sha256.Sum256(data)
	copy(sum[:], full[:objHashLen])
	c.mu.Lock()
	if c.m == nil || c.bytes+len(data) > maxHashCache {
		c.m, c.bytes = map[string][objHashLen]byte{}, 0
	}
	c.m[string(data)] = sum
	c.bytes += len(data)
	c.mu.Unlock()
	return sum
}

// restPool holds the buffers bodies are split into before compression.
var restPool = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}
