package console

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Login makes the console ask who is using it (docs/console.md, Security): the console's Kafka
// clients then authenticate as that user on a SASL listener of the node, so the user's ACLs
// limit what the pages show and do, and the broker checks the password.
type Login struct {
	// Bootstrap is the node's SASL listener.
	Bootstrap func() []string
	// TLS reaches it when it is SASL_SSL (nil: SASL_PLAINTEXT).
	TLS *tls.Config
	// Mechanisms are the SASL mechanisms to log a user in with, best first: the SCRAM
	// mechanisms the user has credentials for, or PLAIN.
	Mechanisms func(user string) []string
}

const (
	sessionCookie = "runnel_console"
	sessionIdle   = 30 * time.Minute
	sessionMax    = 8 * time.Hour
	// maxUserSessions is how many sessions one user may have: a login past it ends the user's
	// least recently used one, so logins in a loop cannot fill the node's memory with clients.
	maxUserSessions = 16
)

// sessionSweep is how often sessions that ended (idle or too old) are removed and their Kafka
// clients closed, used again or not.
var sessionSweep = time.Minute

// session is a logged-in user: its Kafka client authenticated as the user.
type session struct {
	id, user      string
	opts          []kgo.Opt // seed, TLS and SASL of every client made for the user
	cl            *kgo.Client
	created, last time.Time
}

func (ss *session) expired(now time.Time) bool {
	return now.Sub(ss.last) > sessionIdle || now.Sub(ss.created) > sessionMax
}

// sessions are the logged-in users. The map owns each session's client: whoever removes a
// session from it closes the client, outside mu.
type sessions struct {
	mu     sync.Mutex
	m      map[string]*session
	closed bool // the console is closed: a login that ends now is not kept
}

func (s *sessions) get(id string, now time.Time) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[id]
	if ss == nil {
		return nil
	}
	if ss.expired(now) {
		delete(s.m, id)
		go ss.cl.Close() // not on the request's way
		return nil
	}
	ss.last = now
	return ss
}

// add keeps ss, ending its user's least recently used session when the user has
// maxUserSessions already.
func (s *sessions) add(ss *session) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ss.cl.Close()
		return
	}
	if s.m == nil {
		s.m = map[string]*session{}
	}
	var n int
	var lru *session
	for _, o := range s.m {
		if o.user == ss.user {
			n++
			if lru == nil || o.last.Before(lru.last) {
				lru = o
			}
		}
	}
	if n < maxUserSessions {
		lru = nil
	} else {
		delete(s.m, lru.id)
	}
	s.m[ss.id] = ss
	s.mu.Unlock()
	if lru != nil {
		lru.cl.Close()
	}
}

func (s *sessions) drop(id string) {
	s.mu.Lock()
	ss := s.m[id]
	delete(s.m, id)
	s.mu.Unlock()
	if ss != nil {
		ss.cl.Close()
	}
}

// sweep removes the sessions that ended by now and closes their clients; it returns how many.
func (s *sessions) sweep(now time.Time) int {
	var ended []*session
	s.mu.Lock()
	for id, ss := range s.m {
		if ss.expired(now) {
			delete(s.m, id)
			ended = append(ended, ss)
		}
	}
	s.mu.Unlock()
	for _, ss := range ended {
		ss.cl.Close()
	}
	return len(ended)
}

func (s *sessions) closeAll() {
	s.mu.Lock()
	all := s.m
	s.m, s.closed = nil, true
	s.mu.Unlock()
	for _, ss := range all {
		ss.cl.Close()
	}
}

// sweepSessions sweeps the sessions every sessionSweep until stop is closed.
func (c *Console) sweepSessions(stop <-chan struct{}) {
	t := time.NewTicker(sessionSweep)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if n := c.sessions.sweep(now); n > 0 {
				c.cfg.Logger.Debug("console: sessions ended", "sessions", n)
			}
		}
	}
}

type sessionKey struct{}

func sessionOf(ctx context.Context) *session {
	ss, _ := ctx.Value(sessionKey{}).(*session)
	return ss
}

// guard lets a request through once it belongs to a session (or always, without Login), and
// refuses requests for another host name (hosts.go) and cross-site form posts.
func (c *Console) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.hosts.serves(r.Host) {
			refuseHost(w, r)
			return
		}
		if r.Method == http.MethodPost && crossSite(r) {
			http.Error(w, "console: a form from another site is refused", http.StatusForbidden)
			return
		}
		if c.cfg.Login == nil || strings.HasPrefix(r.URL.Path, "/static/") || r.URL.Path == "/login" {
			next.ServeHTTP(w, r)
			return
		}
		var ss *session
		if ck, err := r.Cookie(sessionCookie); err == nil {
			ss = c.sessions.get(ck.Value, time.Now())
		}
		if ss == nil {
			if strings.HasPrefix(r.URL.Path, "/api/") {
				http.Error(w, `{"error":"log in first"}`, http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, ss)))
	})
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "login", page{Title: "Log in", Data: map[string]string{"Next": safeNext(r.URL.Query().Get("next"))}})
}

// crossSite reports whether a form post comes from another site: by its Origin (also "null",
// which a sandboxed frame or a data: URL sends: OWASP's CSRF cheat sheet), or by the browser's
// Sec-Fetch-Site.
func crossSite(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s == "cross-site" || s == "same-site" {
		return true
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return false // not a browser's cross-site form (they send Origin with every POST)
	}
	u, err := url.Parse(o)
	return err != nil || o == "null" || u.Host != r.Host
}

// safeNext keeps a post-login redirect on this site: a path, without scheme or host once a
// browser has read it (browsers drop tabs and newlines from URLs, so "/\t/evil.example" is
// "//evil.example" to them: any control character is refused).
func safeNext(s string) string {
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.Contains(s, "\\") ||
		strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "/"
	}
	if u, err := url.Parse(s); err != nil || u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return s
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	user, pass, next := strings.TrimSpace(r.PostForm.Get("user")), r.PostForm.Get("password"), safeNext(r.PostForm.Get("next"))
	fail := func(msg string) {
		c.render(w, r, "login", page{Title: "Log in", Error: msg, Data: map[string]string{"Next": next}, Form: r.PostForm, Status: http.StatusUnauthorized})
	}
	if user == "" || pass == "" || c.cfg.Login == nil {
		fail("Give a user name and a password.")
		return
	}
	var lastErr error
	for _, m := range c.cfg.Login.Mechanisms(user) {
		var mech sasl.Mechanism
		switch m {
		case "SCRAM-SHA-256":
			mech = scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			mech = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
		case "PLAIN":
			mech = plain.Auth{User: user, Pass: pass}.AsMechanism()
		default:
			continue
		}
		opts := []kgo.Opt{kgo.SeedBrokers(c.cfg.Login.Bootstrap()...), kgo.ClientID("runnel-console"), kgo.SASL(mech)}
		if c.cfg.Login.TLS != nil {
			opts = append(opts, kgo.DialTLSConfig(c.cfg.Login.TLS.Clone()))
		}
		cl, err := kgo.NewClient(append(opts, kgo.RequestRetries(2), kgo.RetryTimeout(5*time.Second))...)
		if err != nil {
			lastErr = err
			continue
		}
		ctx, cancel := ctxTimeout(r)
		err = cl.Ping(ctx) // the broker checks the password
		cancel()
		if err != nil {
			cl.Close()
			lastErr = err
			continue
		}
		id := make([]byte, 32)
		rand.Read(id)
		now := time.Now()
		ss := &session{id: hex.EncodeToString(id), user: user, opts: opts, cl: cl, created: now, last: now}
		c.sessions.add(ss)
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: ss.id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
			Secure: r.TLS != nil, MaxAge: int(sessionMax.Seconds())})
		c.cfg.Logger.Info("console: logged in", "user", user, "remote", r.RemoteAddr)
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if lastErr == nil {
		lastErr = errors.New("no SASL mechanism to log in with")
	}
	c.cfg.Logger.Warn("console: login failed", "user", user, "remote", r.RemoteAddr, "err", lastErr)
	fail("Login failed: the user name or the password is wrong.")
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		c.sessions.drop(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
