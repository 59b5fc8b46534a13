// Package tenancy holds who may use the gateway: organisations, teams and
// projects with their limits and capacity, API keys and their hashing, the
// Keyring that finds a key's tenant, the Tree of levels with the changes
// made at run time laid over the config's, and the Tenant a request
// carries. It imports only the catalog's name rules.
package tenancy
