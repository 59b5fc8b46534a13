// Package release signs and verifies llmgw's release files in the format
// of the minisign tool (Ed25519 over the BLAKE2b-512 of the file, the
// "ED" algorithm), so that a user can check a release with
//
//	minisign -Vm SHA256SUMS -P <public key>
//
// and "llmgw upgrade" can check it with the same code. It imports no
// Caddy: the release tooling under scripts/ uses it as well.
package release

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Algorithm names of minisign: "Ed" signs the file itself (legacy), "ED"
// signs its BLAKE2b-512 (the default since minisign 0.8, and the only one
// this package writes).
const (
	algEd     = "Ed"
	algHashed = "ED"
)

// ErrBadSignature is the error of a signature that does not match.
var ErrBadSignature = errors.New("signature does not match")

// KeyID is the 8 bytes minisign names a key by; it prints as 16
// upper-case hex digits, as minisign shows it.
type KeyID [8]byte

func (id KeyID) String() string {
	return fmt.Sprintf("%016X", binary.LittleEndian.Uint64(id[:]))
}

// PublicKey is a minisign public key.
type PublicKey struct {
	ID  KeyID
	Key ed25519.PublicKey
}

// SecretKey is a minisign secret key, kept unencrypted (see
// MarshalSecretKey).
type SecretKey struct {
	ID  KeyID
	Key ed25519.PrivateKey
}

// Public returns the secret key's public key.
func (s SecretKey) Public() PublicKey {
	return PublicKey{ID: s.ID, Key: s.Key.Public().(ed25519.PublicKey)}
}

// GenerateKey makes a new key pair with a random key id.
func GenerateKey(rnd io.Reader) (SecretKey, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	_, priv, err := ed25519.GenerateKey(rnd)
	if err != nil {
		return SecretKey{}, fmt.Errorf("generating a key: %w", err)
	}
	var id KeyID
	if _, err := io.ReadFull(rnd, id[:]); err != nil {
		return SecretKey{}, fmt.Errorf("generating a key id: %w", err)
	}
	return SecretKey{ID: id, Key: priv}, nil
}

// String is the public key as minisign prints it: the base64 of "Ed",
// the key id and the 32 bytes of the key (the RW… line of a .pub file).
func (p PublicKey) String() string {
	b := make([]byte, 0, 42)
	b = append(append(append(b, algEd...), p.ID[:]...), p.Key...)
	return base64.StdEncoding.EncodeToString(b)
}

// MarshalText is the content of a minisign .pub file.
func (p PublicKey) MarshalText() []byte {
	return []byte("untrusted comment: minisign public key " + p.ID.String() + "\n" + p.String() + "\n")
}

// ParsePublicKey reads a public key: the RW… line alone, or a .pub file
// (a comment line, then that line).
func ParsePublicKey(s string) (PublicKey, error) {
	line := lastLine(s)
	b, err := base64.StdEncoding.DecodeString(line)
	if err != nil || len(b) != 42 || string(b[:2]) != algEd {
		return PublicKey{}, fmt.Errorf("reading a minisign public key: %q is not one (the base64 line starting RW… of a minisign .pub file)", abbrev(line))
	}
	var p PublicKey
	copy(p.ID[:], b[2:10])
	p.Key = ed25519.PublicKey(bytes.Clone(b[10:]))
	return p, nil
}

// lastLine is the last non-empty line of s, trimmed.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func abbrev(s string) string {
	if len(s) > 24 {
		return s[:24] + "…"
	}
	return s
}
