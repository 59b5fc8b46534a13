package setup

import (
	"fmt"
	"net"
	"strings"
)

func askCluster(p *prompter, a *setupAnswers, m machine, given func(...string) bool) error {
	if given("redis", "sentinel") {
		return nil
	}
	p.section("Cluster", "Several machines can be one gateway: they share models, keys and placement through\nRedis (made highly available by Sentinel). A machine on its own needs none.")
	use, err := p.yes("Is this machine a node of a cluster?", a.cluster())
	if err != nil || !use {
		a.Redis, a.Sentinels = "", nil
		return err
	}
	cur := a.Redis
	if len(a.Sentinels) > 0 {
		cur = strings.Join(a.Sentinels, ",")
	}
	store, err := p.ask("  Redis: a URL such as redis://10.0.0.5:6379/0, or the Sentinels as host:port,host:port", cur, func(v string) error {
		c := *a
		c.Redis, c.Sentinels = splitStore(v)
		c.Master, c.Node, c.Advertise, c.ClusterName, c.SecretEnv = "m", "n", "h:1", "c", "S"
		return checkCluster(&c)
	})
	if err != nil {
		return err
	}
	a.Redis, a.Sentinels = splitStore(store)
	return askNode(p, a, m)
}

func askNode(p *prompter, a *setupAnswers, m machine) error {
	var err error
	if len(a.Sentinels) > 0 {
		if a.Master, err = p.ask("  the name the Sentinels monitor", def(a.Master, "mymaster"), nonEmpty("a name")); err != nil {
			return err
		}
	}
	if a.Node, err = p.ask("  this node's name", def(a.Node, m.Host), nonEmpty("a name")); err != nil {
		return err
	}
	a.Advertise, err = p.ask("  where the other nodes reach this one (host:port, TLS)", def(a.Advertise, defaultAdvertise()), func(v string) error { return checkHostPort("the address", v) })
	return err
}

func askConsole(p *prompter, a *setupAnswers, _ machine, given func(...string) bool) error {
	if given("console") {
		return nil
	}
	p.section("Console and sign-in", "The web console (/console/) and the admin API (/llm/) on the site. People sign in with\nthe admin token made now (shown once), or through your OpenID Connect provider or LDAP directory.")
	var err error
	if a.Console, err = p.yes("Serve the console?", a.Console); err != nil || !a.Console {
		a.OIDCIssuer, a.LDAPURL = "", ""
		return err
	}
	if !given("oidc-issuer") {
		iss, err := p.ask("  an OpenID Connect issuer URL, or none", orNone(a.OIDCIssuer), optional(func(v string) error {
			return checkSignIn(&setupAnswers{Console: true, OIDCIssuer: v, OIDCClient: "c", OIDCAdmin: "g"})
		}))
		if a.OIDCIssuer = none(iss); err != nil {
			return err
		}
		if a.OIDCIssuer != "" {
			if a.OIDCClient, err = p.ask("    llmgw's client id there", a.OIDCClient, nonEmpty("the client id")); err != nil {
				return err
			}
			if a.OIDCAdmin, err = p.ask("    the groups value that makes an admin", a.OIDCAdmin, nonEmpty("a value")); err != nil {
				return err
			}
		}
	}
	if given("ldap-url") {
		return nil
	}
	return askLDAP(p, a)
}

func askLDAP(p *prompter, a *setupAnswers) error {
	u, err := p.ask("  an LDAP URL (ldaps://host:636), or none", orNone(a.LDAPURL), optional(func(v string) error {
		return checkSignIn(&setupAnswers{Console: true, LDAPURL: v, LDAPBaseDN: "b", LDAPAdmin: "cn=x"})
	}))
	if a.LDAPURL = none(u); err != nil || a.LDAPURL == "" {
		return err
	}
	if a.LDAPBaseDN, err = p.ask("    where to search for people (base DN)", a.LDAPBaseDN, nonEmpty("a DN such as ou=people,dc=example,dc=com")); err != nil {
		return err
	}
	a.LDAPAdmin, err = p.ask("    the group whose members are admins (a DN)", a.LDAPAdmin, func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("give a group's DN, such as cn=llm-admins,ou=groups,dc=example,dc=com")
		}
		return nil
	})
	return err
}

func askUnits(p *prompter, a *setupAnswers, _ machine, given func(...string) bool) error {
	if given("units") {
		return nil
	}
	p.section("Service", "A systemd unit runs llmgw as the user "+a.User+", restarts it on failure and waits for\nopen streams when it stops. It is enabled and started only with --enable.")
	u, err := p.ask("Write the unit to (a directory, or none)", orNone(a.Units), optional(func(v string) error {
		return checkPaths(&setupAnswers{Dir: "/", Data: "/", Binary: "/", Units: v})
	}))
	a.Units = none(u)
	return err
}

// splitStore reads a Redis answer: a URL, or Sentinels' addresses.
func splitStore(v string) (redis string, sentinels []string) {
	if strings.Contains(v, "://") {
		return v, nil
	}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			sentinels = append(sentinels, s)
		}
	}
	return "", sentinels
}

func def(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

func nonEmpty(what string) func(string) error {
	return func(v string) error {
		if v == "" || strings.ContainsAny(v, " \t") {
			return fmt.Errorf("give %s, without spaces", what)
		}
		return nil
	}
}

// defaultAdvertise is this machine's first address that is not
// loopback, on port 7443.
func defaultAdvertise() string {
	addrs, _ := net.InterfaceAddrs()
	for _, ad := range addrs {
		if ip, ok := ad.(*net.IPNet); ok && !ip.IP.IsLoopback() && ip.IP.To4() != nil {
			return net.JoinHostPort(ip.IP.String(), "7443")
		}
	}
	return "127.0.0.1:7443"
}
