package agent

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Signing algorithms a public key may verify, one per key type.
const (
	algRS256 = "RS256"
	algES256 = "ES256"
	algEdDSA = "EdDSA"
)

// minRSABits is the smallest RSA modulus accepted as a verification key.
const minRSABits = 2048

// publicKey is one configured verification key with its pinned algorithm.
type publicKey struct {
	kid string
	alg string
	key crypto.PublicKey // *rsa.PublicKey, *ecdsa.PublicKey (P-256) or ed25519.PublicKey
}

// parsePublicKeys reads WAKEGATE_JWT_PUBLIC_KEYS: a JWKS document when it
// starts with "{", otherwise one or more PEM blocks. Errors name the key by
// position (and kid when known) and never quote key material.
func parsePublicKeys(s string) ([]publicKey, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if strings.HasPrefix(s, "{") {
		return parseJWKS([]byte(s))
	}
	return parsePEM([]byte(s))
}

// jwk holds the members of a JSON Web Key that wakegate reads.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
	D   string `json:"d"`
}

// parseJWKS reads a {"keys":[...]} document. Keys marked "use":"enc" are
// skipped; a JWK without kid gets its RFC 7638 thumbprint as kid.
func parseJWKS(b []byte) ([]publicKey, error) {
	var doc struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, errors.New("jwks: not a valid json document")
	}
	if len(doc.Keys) == 0 {
		return nil, errors.New(`jwks: no keys (want {"keys":[...]})`)
	}
	var out []publicKey
	for i, k := range doc.Keys {
		if k.Use == "enc" {
			continue
		}
		pk, err := k.publicKey()
		if err != nil {
			if k.Kid != "" {
				return nil, fmt.Errorf("jwks key %d (kid %q): %w", i+1, k.Kid, err)
			}
			return nil, fmt.Errorf("jwks key %d: %w", i+1, err)
		}
		out = append(out, pk)
	}
	return out, nil
}

// publicKey converts a JWK; alg, when present, must be the one alg its key
// type allows.
func (k jwk) publicKey() (publicKey, error) {
	if k.D != "" {
		return publicKey{}, errors.New("is a private key; configure the public key only")
	}
	var (
		key crypto.PublicKey
		alg string
		err error
	)
	switch {
	case k.Kty == "RSA":
		alg = algRS256
		key, err = jwkRSA(k.N, k.E)
	case k.Kty == "EC" && k.Crv == "P-256":
		alg = algES256
		key, err = jwkEC(k.X, k.Y)
	case k.Kty == "OKP" && k.Crv == "Ed25519":
		alg = algEdDSA
		key, err = jwkEd25519(k.X)
	case k.Kty == "EC" || k.Kty == "OKP":
		return publicKey{}, fmt.Errorf("unsupported crv %q (want P-256 or Ed25519)", k.Crv)
	default:
		return publicKey{}, fmt.Errorf("unsupported kty %q (want RSA, EC or OKP)", k.Kty)
	}
	if err != nil {
		return publicKey{}, err
	}
	if k.Alg != "" && k.Alg != alg {
		return publicKey{}, fmt.Errorf("alg %q does not fit the key (want %s)", k.Alg, alg)
	}
	kid := k.Kid
	if kid == "" {
		if kid, err = thumbprint(key); err != nil {
			return publicKey{}, err
		}
	}
	return publicKey{kid: kid, alg: alg, key: key}, nil
}

func b64(s string) ([]byte, error) { return base64.RawURLEncoding.Strict().DecodeString(s) }

func jwkRSA(n, e string) (*rsa.PublicKey, error) {
	nb, err1 := b64(n)
	eb, err2 := b64(e)
	if err1 != nil || err2 != nil || len(nb) == 0 || len(eb) == 0 || len(eb) > 4 {
		return nil, errors.New("bad rsa n or e")
	}
	ei := new(big.Int).SetBytes(eb).Int64()
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(nb), E: int(ei)}
	return pub, checkRSA(pub)
}

func checkRSA(pub *rsa.PublicKey) error {
	if pub.N.BitLen() < minRSABits {
		return fmt.Errorf("rsa key of %d bits; want at least %d", pub.N.BitLen(), minRSABits)
	}
	if pub.E < 3 || pub.E%2 == 0 {
		return errors.New("bad rsa exponent")
	}
	return nil
}

func jwkEC(x, y string) (*ecdsa.PublicKey, error) {
	xb, err1 := b64(x)
	yb, err2 := b64(y)
	if err1 != nil || err2 != nil || len(xb) != 32 || len(yb) != 32 {
		return nil, errors.New("bad ec x or y")
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, xb...), yb...))
	if err != nil {
		return nil, errors.New("ec point not on p-256")
	}
	return pub, nil
}

func jwkEd25519(x string) (ed25519.PublicKey, error) {
	xb, err := b64(x)
	if err != nil || len(xb) != ed25519.PublicKeySize {
		return nil, errors.New("bad ed25519 x")
	}
	return ed25519.PublicKey(xb), nil
}

// parsePEM reads one or more PEM blocks: PUBLIC KEY (PKIX), RSA PUBLIC KEY
// (PKCS #1) or CERTIFICATE (its subject key). Each key's kid is its RFC 7638
// thumbprint.
func parsePEM(b []byte) ([]publicKey, error) {
	var out []publicKey
	for i := 1; ; i++ {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		pk, err := pemKey(block)
		if err != nil {
			return nil, fmt.Errorf("pem block %d: %w", i, err)
		}
		out = append(out, pk)
	}
	if len(bytes.TrimSpace(b)) > 0 {
		if len(out) == 0 {
			return nil, errors.New("neither a jwks document nor pem")
		}
		return nil, fmt.Errorf("pem: unparsable text after block %d", len(out))
	}
	return out, nil
}

func pemKey(block *pem.Block) (publicKey, error) {
	var (
		key any
		err error
	)
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			key = cert.PublicKey
		}
	default:
		if strings.Contains(block.Type, "PRIVATE") {
			return publicKey{}, errors.New("is a private key; configure the public key only")
		}
		return publicKey{}, fmt.Errorf("unsupported block type %q", block.Type)
	}
	if err != nil {
		return publicKey{}, errors.New("unparsable key")
	}
	var alg string
	switch k := key.(type) {
	case *rsa.PublicKey:
		if err := checkRSA(k); err != nil {
			return publicKey{}, err
		}
		alg = algRS256
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return publicKey{}, errors.New("unsupported ec curve (want p-256)")
		}
		alg = algES256
	case ed25519.PublicKey:
		alg = algEdDSA
	default:
		return publicKey{}, fmt.Errorf("unsupported key type %T", key)
	}
	kid, err := thumbprint(key)
	if err != nil {
		return publicKey{}, err
	}
	return publicKey{kid: kid, alg: alg, key: key}, nil
}

// thumbprint is the RFC 7638 JWK SHA-256 thumbprint of key, base64url
// without padding: the hash of the key's required JWK members in
// lexicographic order with no whitespace.
func thumbprint(key crypto.PublicKey) (string, error) {
	enc := base64.RawURLEncoding.EncodeToString
	var s string
	switch k := key.(type) {
	case *rsa.PublicKey:
		e := big.NewInt(int64(k.E)).Bytes()
		s = `{"e":"` + enc(e) + `","kty":"RSA","n":"` + enc(k.N.Bytes()) + `"}`
	case *ecdsa.PublicKey:
		p, err := k.Bytes() // 0x04 || x || y, 32 bytes each on P-256
		if err != nil || len(p) != 65 {
			return "", errors.New("bad ec key")
		}
		s = `{"crv":"P-256","kty":"EC","x":"` + enc(p[1:33]) + `","y":"` + enc(p[33:]) + `"}`
	case ed25519.PublicKey:
		s = `{"crv":"Ed25519","kty":"OKP","x":"` + enc(k) + `"}`
	default:
		return "", fmt.Errorf("unsupported key type %T", key)
	}
	sum := sha256.Sum256([]byte(s))
	return enc(sum[:]), nil
}
