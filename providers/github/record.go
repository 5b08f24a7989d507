package github

import (
	"fmt"

	"github.com/bytedance/sonic"
)

// EncodeFact renders a normalized fact for the ingest record: the gateway
// normalizes a delivery while it validates it (one parse either way) and
// commits the fact beside the raw body, so the deriver need not read,
// decompress and parse the body a second time. The raw body stays the
// source of truth: a record without a fact, or whose fact does not decode,
// is normalized from it, as is every operator redelivery.
func EncodeFact(f *Fact) ([]byte, error) {
	b, err := factAPI.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode fact: %w", err)
	}
	return b, nil
}

// factAPI is sonic.ConfigStd but for the output of json.Marshaler values,
// which it checks and copies instead of compacting it with encoding/json:
// a fact's are time.Time's and its Data, which setData makes as
// json.Marshal makes it (prData.appendJSON for a pull_request), compact
// already, so the bytes are ConfigStd's
// (TestEncodeFactAsStd) without a second scan of them.
var factAPI = sonic.Config{EscapeHTML: true, SortMapKeys: true, CopyString: true, ValidateString: true}.Froze()

// DecodeFact reverses EncodeFact exactly. It matches keys as
// encoding/json does (ConfigStd), whatever case the version that wrote
// the record gave them.
func DecodeFact(b []byte) (*Fact, error) {
	f := new(Fact)
	if err := unmarshalWith(sonic.ConfigStd, b, f); err != nil {
		return nil, fmt.Errorf("decode fact: %w", err)
	}
	return f, nil
}
