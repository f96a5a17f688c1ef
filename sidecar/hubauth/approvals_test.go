package hubauth

import (
	"testing"
	"time"
)

// TestApprovalsShared checks that one user's approvals push out only her own (their
// tokens ending with them), that at the bound of all users' approvals a new one is
// refused rather than another user's forgotten, and that a client no user approves any
// more leaves the clients kept for the process's life.
func TestApprovalsShared(t *testing.T) {
	c := testConfig()
	c.MaxApprovals, c.MaxConsents = 3, 5
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	register := func() string {
		id := random()
		if !s.clients.put(id, client{redirectURIs: []string{"https://app.example/cb"}, registered: s.now()}, time.Hour) || !s.keep(id) {
			t.Fatal("cannot register a client")
		}
		return id
	}
	approve := func(user, id string) bool {
		return s.grant(user, approval{clientID: id, redirectURI: "https://app.example/cb", at: s.now()})
	}
	alice := register()
	if !approve("alice", alice) {
		t.Fatal("alice's approval refused")
	}
	var mallory []string
	for range 10 {
		id := register()
		mallory = append(mallory, id)
		if !approve("mallory", id) {
			t.Fatal("mallory's approval refused below the bound of all users'")
		}
	}
	if !s.approved("alice", alice, "https://app.example/cb") {
		t.Error("mallory's approvals pushed out alice's")
	}
	if n := len(s.approvals("mallory")); n != c.MaxApprovals {
		t.Errorf("mallory holds %d approvals, want her bound %d", n, c.MaxApprovals)
	}
	now := time.Now()
	s.clients.now = func() time.Time { return now }
	for _, id := range mallory[:len(mallory)-c.MaxApprovals] {
		if _, ok := s.kept.get(id); ok {
			t.Errorf("client %s, no longer approved by anyone, is still kept for the process's life", id)
		}
	}
	// Pushed out, they wait again on the short clock, not for the registration TTL: one
	// user approving and dropping clients kept the waiting full for a day (red team
	// pass 13, M5).
	now = now.Add(RegistrationLoginWindow + time.Second)
	for _, id := range mallory[:len(mallory)-c.MaxApprovals] {
		if _, ok := s.clients.get(id); ok {
			t.Errorf("client %s, pushed out of mallory's approvals, still waits past RegistrationLoginWindow", id)
		}
	}
	s.clients.now = time.Now
	// 1 of alice's + 3 of mallory's: one place left, then refused.
	if !approve("bob", register()) {
		t.Fatal("bob's approval refused below the bound")
	}
	if approve("carol", register()) {
		t.Error("an approval beyond the bound of all users' was taken")
	}
	if !s.approved("alice", alice, "https://app.example/cb") || len(s.approvals("bob")) != 1 {
		t.Error("an approval beyond the bound pushed out another user's")
	}
}
