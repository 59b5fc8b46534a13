package tenancy

import (
	"crypto/rand"
	"errors"
	"math/big"
)

// SecretPrefix starts every secret llmgw makes.
const SecretPrefix = "sk-llmgw-"

// Key lookup errors; both answer 401.
var (
	ErrNoKey      = errors.New("no API key; send one as \"Authorization: Bearer <key>\"")
	ErrUnknownKey = errors.New("the API key is not valid (unknown or revoked); check the key or ask an administrator for a new one")
)

// NewSecret makes a random key secret.
func NewSecret() (string, error) {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, 32)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", err
		}
		b[i] = alphabet[n.Int64()]
	}
	return SecretPrefix + string(b), nil
}
