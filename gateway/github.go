package gateway

import (
	"errors"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
)

// githubWebhook is POST /webhooks/github (docs/design.md §3): verify, parse and
// normalize, commit (the raw body, and the fact for the deriver), answer.
// Folding the fact into the tracker and journaling it are derivations.
func (s *Server) githubWebhook(c *gin.Context) {
	body, release := s.readWebhookBody(c, s.cfg.MaxBody)
	if body == nil {
		s.metrics.webhooks.WithLabelValues("refused").Inc()
		return
	}
	defer release()
	mediaType, p := s.verifyDelivery(c, body)
	if p != nil {
		s.metrics.webhooks.WithLabelValues("refused").Inc()
		abort(c, p)
		return
	}
	eventType := c.GetHeader("X-GitHub-Event")
	guid := c.GetHeader("X-GitHub-Delivery")
	if eventType == "ping" {
		s.metrics.webhooks.WithLabelValues("ping").Inc()
		c.JSON(http.StatusOK, gin.H{"delivery": guid, "status": "pong"})
		return
	}
	payload := body
	if mediaType == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(body))
		if err != nil || form.Get("payload") == "" {
			s.metrics.webhooks.WithLabelValues("refused").Inc()
			abort(c, newProblem(http.StatusBadRequest, "malformed", "form body without a payload field"))
			return
		}
		payload = []byte(form.Get("payload"))
	}
	// One parse validates the body and normalizes it; the fact rides in
	// the ingest record. A JSON payload that lacks what its mapping needs
	// is committed all the same (the deriver sets it aside as poison, for
	// an operator to see); only a body that is not JSON is refused.
	head, fact, nerr := github.Parse(eventType, payload)
	if errors.Is(nerr, github.ErrNotJSON) {
		s.metrics.webhooks.WithLabelValues("refused").Inc()
		abort(c, newProblem(http.StatusBadRequest, "malformed", "payload is not a JSON object"))
		return
	}
	d := &ingest.Delivery{
		GUID: guid, Event: eventType, Hook: hookScope(c), ContentType: mediaType,
		Repo: head.Repo, Body: body, Received: s.cfg.Now().UTC(),
	}
	outcome := "accepted"
	if ws, ok := s.cfg.Workspaces.Lookup(d.Repo); ok {
		d.Workspace = ws
	} else {
		d.Ignored, outcome = "repository not mapped to a workspace", "unmapped"
	}
	if d.Ignored == "" && !github.Mapped(eventType, head.Action) {
		d.Ignored, outcome = "event not mapped: "+eventType+"."+head.Action, "ignored"
	}
	if d.Ignored == "" && nerr == nil && fact.Ignored == "" {
		if fact.Time.IsZero() {
			fact.Time = d.Received.Truncate(time.Millisecond) // as the raw record keeps it
		}
		d.Fact, _ = github.EncodeFact(&fact) // nil on error: the deriver normalizes the body
	}
	ctx, cancel := s.commitContext(c)
	defer cancel()
	res, err := s.deps.Ingest.CommitDelivery(ctx, d)
	if err != nil {
		s.fail(c, "delivery", err)
		return
	}
	if res != ingest.Committed {
		s.metrics.webhooks.WithLabelValues("duplicate").Inc()
		c.JSON(http.StatusOK, gin.H{"delivery": guid, "duplicate": true})
		return
	}
	s.metrics.webhooks.WithLabelValues(outcome).Inc()
	if d.Ignored != "" {
		c.JSON(http.StatusAccepted, gin.H{"delivery": guid, "status": "ignored", "reason": d.Ignored})
		return
	}
	accepted(c, guid)
}

// verifyDelivery checks headers, signature, App target and media type, and
// returns the media type.
func (s *Server) verifyDelivery(c *gin.Context, body []byte) (string, *problem) {
	if c.GetHeader("X-GitHub-Event") == "" || c.GetHeader("X-GitHub-Delivery") == "" {
		return "", newProblem(http.StatusBadRequest, "malformed", "X-GitHub-Event and X-GitHub-Delivery are required")
	}
	if !event.ValidID(c.GetHeader("X-GitHub-Delivery")) || !event.ValidID(c.GetHeader("X-GitHub-Event")) {
		return "", newProblem(http.StatusBadRequest, "malformed", "X-GitHub-Event or X-GitHub-Delivery is not a plain token")
	}
	sig := c.GetHeader("X-Hub-Signature-256")
	if sig == "" {
		if c.GetHeader("X-Hub-Signature") != "" {
			return "", newProblem(http.StatusUnauthorized, "unauthenticated", "SHA-1 signatures are not accepted; configure a secret so GitHub sends X-Hub-Signature-256")
		}
		return "", newProblem(http.StatusUnauthorized, "unauthenticated", "missing X-Hub-Signature-256")
	}
	if err := github.VerifySignature(sig, body, s.cfg.WebhookSecrets); err != nil {
		if errors.Is(err, github.ErrSignature) {
			return "", newProblem(http.StatusUnauthorized, "unauthenticated", "signature does not match")
		}
		return "", newProblem(http.StatusUnauthorized, "unauthenticated", "signature does not verify")
	}
	if s.cfg.AppID != "" && c.GetHeader("X-GitHub-Hook-Installation-Target-ID") != s.cfg.AppID {
		return "", newProblem(http.StatusForbidden, "forbidden", "delivery is not for this GitHub App")
	}
	mediaType, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err != nil || (mediaType != "application/json" && mediaType != "application/x-www-form-urlencoded") {
		return "", newProblem(http.StatusUnsupportedMediaType, "unsupported-media",
			"content type must be application/json or application/x-www-form-urlencoded")
	}
	return mediaType, nil
}

// hookScope is the dedup scope of a delivery: the App (installation target)
// id, else the hook id. A GUID is shared by every hook that receives an event.
func hookScope(c *gin.Context) string {
	for _, h := range []string{"X-GitHub-Hook-Installation-Target-ID", "X-GitHub-Hook-ID"} {
		if id := c.GetHeader(h); isDigits(id) {
			return id
		}
	}
	return "0"
}

// isDigits reports whether s matches ^[0-9]{1,20}$.
func isDigits(s string) bool {
	if len(s) == 0 || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// accepted answers 202 {"delivery": guid, "status": "accepted"}, the bytes
// c.JSON renders for it (guid is a token: nothing to escape), without
// encoding a map on every delivery.
func accepted(c *gin.Context, guid string) {
	b := make([]byte, 0, 48+len(guid))
	b = append(b, `{"delivery":"`...)
	b = append(b, guid...)
	b = append(b, `","status":"accepted"}`...)
	c.Data(http.StatusAccepted, "application/json; charset=utf-8", b)
}
