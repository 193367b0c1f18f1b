// This file keeps the cluster's recent answers about member pods, so that a
// burst of identical requests costs one dry-run.

package memberdryrun

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxCachedAnswers bounds the cache; when full, expired answers are dropped
// first and then the whole cache.
const maxCachedAnswers = 1024

// answer is what the cluster said about a member pod: its warnings, and the
// refusal (nil when the pod passes).
type answer struct {
	warnings []string
	status   *metav1.Status
}

// final reports whether the answer is about the pod (accepted, or refused by
// a rule), rather than about reaching the cluster: only those are cached.
func (a answer) final() bool {
	return a.status == nil || (a.status.Reason != metav1.StatusReasonTimeout && a.status.Reason != metav1.StatusReasonServiceUnavailable)
}

type cachedAnswer struct {
	answer
	expires time.Time
}

// answerCache holds answers for ttl.
type answerCache struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	answers map[string]cachedAnswer
}

func newAnswerCache(ttl time.Duration, now func() time.Time) *answerCache {
	return &answerCache{ttl: ttl, now: now, answers: map[string]cachedAnswer{}}
}

// get returns the unexpired answer for key.
func (c *answerCache) get(key string) (answer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.answers[key]
	if !ok || !c.now().Before(a.expires) {
		return answer{}, false
	}
	return a.answer, true
}

// put keeps a for key until the ttl passes.
func (c *answerCache) put(key string, a answer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.answers) >= maxCachedAnswers {
		for k, v := range c.answers {
			if !now.Before(v.expires) {
				delete(c.answers, k)
			}
		}
		if len(c.answers) >= maxCachedAnswers {
			clear(c.answers)
		}
	}
	c.answers[key] = cachedAnswer{answer: a, expires: now.Add(c.ttl)}
}
