package release

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"

	"golang.org/x/crypto/blake2b"
)

// Signature is a minisign signature (.minisig file).
type Signature struct {
	Algorithm        string // "ED" (of the file's BLAKE2b-512) or "Ed" (of the file)
	KeyID            KeyID
	Sig              []byte // 64 bytes
	UntrustedComment string
	TrustedComment   string
	GlobalSig        []byte // 64 bytes: of Sig and the trusted comment
}

// Sign signs data with sk in minisign's default (hashed) form; the
// trusted comment is signed too and shown by minisign when it verifies.
func Sign(sk SecretKey, data []byte, trustedComment string) Signature {
	h := blake2b.Sum512(data)
	s := Signature{Algorithm: algHashed, KeyID: sk.ID, TrustedComment: trustedComment,
		UntrustedComment: "signature from llmgw release key " + sk.ID.String()}
	s.Sig = ed25519.Sign(sk.Key, h[:])
	s.GlobalSig = ed25519.Sign(sk.Key, append(bytes.Clone(s.Sig), trustedComment...))
	return s
}

// MarshalText is the content of the .minisig file.
func (s Signature) MarshalText() []byte {
	head := append(append([]byte(s.Algorithm), s.KeyID[:]...), s.Sig...)
	return []byte("untrusted comment: " + s.UntrustedComment + "\n" +
		base64.StdEncoding.EncodeToString(head) + "\n" +
		"trusted comment: " + s.TrustedComment + "\n" +
		base64.StdEncoding.EncodeToString(s.GlobalSig) + "\n")
}

// ParseSignature reads a .minisig file.
func ParseSignature(text []byte) (Signature, error) {
	lines := strings.Split(strings.TrimRight(string(text), "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "untrusted comment: ") || !strings.HasPrefix(lines[2], "trusted comment: ") {
		return Signature{}, fmt.Errorf("reading a minisign signature: want 4 lines (untrusted comment, signature, trusted comment, global signature), got %d", len(lines))
	}
	head, err := base64.StdEncoding.DecodeString(strings.TrimSpace(lines[1]))
	if err != nil || len(head) != 74 {
		return Signature{}, fmt.Errorf("reading a minisign signature: its second line is not a signature (base64 of 74 bytes)")
	}
	s := Signature{Algorithm: string(head[:2]), Sig: head[10:],
		UntrustedComment: strings.TrimPrefix(lines[0], "untrusted comment: "),
		TrustedComment:   strings.TrimPrefix(strings.TrimRight(lines[2], "\r"), "trusted comment: ")}
	copy(s.KeyID[:], head[2:10])
	if s.Algorithm != algHashed && s.Algorithm != algEd {
		return Signature{}, fmt.Errorf("reading a minisign signature: algorithm %q is not Ed or ED", s.Algorithm)
	}
	if s.GlobalSig, err = base64.StdEncoding.DecodeString(strings.TrimSpace(lines[3])); err != nil || len(s.GlobalSig) != ed25519.SignatureSize {
		return Signature{}, fmt.Errorf("reading a minisign signature: its fourth line is not a global signature (base64 of 64 bytes)")
	}
	return s, nil
}

// Verify checks sig over data with the first of keys whose id is the
// signature's. The error names the signature's key id and the trusted
// ones when none has it, and the key when the signature does not match.
func Verify(data []byte, sig Signature, keys ...PublicKey) error {
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.ID.String())
		if k.ID != sig.KeyID {
			continue
		}
		msg := data
		if sig.Algorithm == algHashed {
			h := blake2b.Sum512(data)
			msg = h[:]
		}
		if !ed25519.Verify(k.Key, msg, sig.Sig) {
			return fmt.Errorf("key %s: %w (the file was changed after it was signed, or signed by another key)", k.ID, ErrBadSignature)
		}
		if !ed25519.Verify(k.Key, append(bytes.Clone(sig.Sig), sig.TrustedComment...), sig.GlobalSig) {
			return fmt.Errorf("key %s: %w: its trusted comment was changed", k.ID, ErrBadSignature)
		}
		return nil
	}
	return fmt.Errorf("signed by key %s, which is not trusted (trusted: %s); if it is yours, trust its public key (llmgw upgrade --key FILE; on a cluster node, release_key in its cluster block): %w",
		sig.KeyID, strings.Join(ids, ", "), ErrBadSignature)
}
