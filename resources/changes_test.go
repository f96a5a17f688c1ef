package resources

import (
	"strconv"
	"strings"
	"testing"
)

// TestAnswersBounded: the answers kept stay within their count and bytes, whatever is
// put, and an answer too large to keep is not kept.
func TestAnswersBounded(t *testing.T) {
	var a answers
	big := strings.Repeat("x", answerCacheBytes/8)
	for i := range 1000 {
		a.put(answerKey{since: strconv.Itoa(i)}, big)
		if len(a.order) > answerCacheSize || a.bytes > answerCacheBytes || a.bytes != len(a.order)*len(big) {
			t.Fatalf("after %d answers: %d kept, %d bytes", i+1, len(a.order), a.bytes)
		}
	}
	if _, ok := a.get(answerKey{since: "999"}); !ok {
		t.Fatal("the newest answer is not kept")
	}
	a.put(answerKey{since: "huge"}, big+"x")
	if _, ok := a.get(answerKey{since: "huge"}); ok {
		t.Fatal("an answer over an eighth of the bound is kept")
	}
	for i := range 1000 {
		a.put(answerKey{since: "s" + strconv.Itoa(i)}, "{}")
	}
	if len(a.order) != answerCacheSize {
		t.Fatalf("%d small answers kept, want %d", len(a.order), answerCacheSize)
	}
}
