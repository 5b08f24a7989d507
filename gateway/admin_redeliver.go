package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/providers/event"
)

// The two redeliver routes of docs/design.md §11 (scope operator). Both run in the
// gateway's process, synchronously, on the code the workers run (wired by
// package stack): the gateway has Redis, and an operator gets what
// was done in the answer rather than a task id to chase.

// RedeliveryRequest is one operator's redelivery.
type RedeliveryRequest struct {
	GUID  string   // a delivery's X-GitHub-Delivery (deliveries)
	Hooks []string // the dedup scopes its raw record may be kept under (deliveries)
	Party string   // the one party to deliver to; "" every recipient (events)
	By    string   // who asked: the token's subject
	// RequestID is the request's id (X-Request-Id, or one the gateway
	// made up): the redelivery's record is keyed by it, so a retried
	// request does nothing twice.
	RequestID string
}

// deliveryRedeliverer re-derives a stored raw delivery (package
// workers/derive) and answers what it produced, as a JSON document. An
// unknown or expired delivery is an error wrapping ingest.ErrNotFound.
// DeliveryHooks lists the hook scopes a delivery is stored under, for a
// redelivery by the GUID alone.
type deliveryRedeliverer interface {
	RedeliverDelivery(ctx context.Context, r RedeliveryRequest) (any, error)
	DeliveryHooks(ctx context.Context, guid string) ([]string, error)
}

// eventRedeliverer delivers a journaled event again (package
// workers/route) and answers what it delivered, as a JSON document.
type eventRedeliverer interface {
	RedeliverEvent(ctx context.Context, e *event.Event, r RedeliveryRequest) (any, error)
}

// Refused is an error a dependency returns for a request it refuses on
// its merits, not for a storage failure: the gateway answers it as a
// problem of that status (409 conflict or 422 unprocessable).
type Refused struct {
	Status int
	Detail string
}

func (r *Refused) Error() string { return r.Detail }

// redeliverRoutes registers the redeliver routes on the operators' group.
func (s *Server) redeliverRoutes(admin *gin.RouterGroup) {
	if s.deps.DeliveryRedeliverer != nil {
		admin.POST("/deliveries/:guid/redeliver", s.redeliverDelivery)
	}
	if s.deps.EventRedeliverer != nil {
		admin.POST("/events/:id/redeliver", s.redeliverEvent)
	}
}

// redeliverDelivery is POST /admin/deliveries/{guid}/redeliver[?hook=]:
// 200 with what the re-derivation produced; 404 for a delivery not stored
// (unknown, or expired with the retention) under the hook named, or
// without ?hook= under any; 409 listing the hooks when it is stored under
// several (each App or webhook that received it keeps its own copy) and
// none was named; 422 for one that cannot be derived.
func (s *Server) redeliverDelivery(c *gin.Context) {
	guid := c.Param("guid")
	if !event.ValidID(guid) {
		abort(c, newProblem(http.StatusBadRequest, "malformed", "guid must be a delivery's X-GitHub-Delivery (letters, digits, '.', '_' or '-', at most 128)"))
		return
	}
	var hooks []string
	if h, ok := c.GetQuery("hook"); ok {
		if !isDigits(h) {
			abort(c, newProblem(http.StatusBadRequest, "malformed", "hook must be the delivery's X-GitHub-Hook-Installation-Target-ID (or X-GitHub-Hook-ID): digits"))
			return
		}
		hooks = []string{h}
	} else {
		found, err := s.deps.DeliveryRedeliverer.DeliveryHooks(c.Request.Context(), guid)
		if s.redeliveryFailed(c, "delivery redelivery", err) {
			return
		}
		switch len(found) {
		case 0:
			abort(c, newProblem(http.StatusNotFound, "not-found",
				fmt.Sprintf("no stored delivery %s under any hook: unknown, or expired with the retention", guid)))
			return
		case 1:
			hooks = found
		default:
			p := newProblem(http.StatusConflict, "conflict", fmt.Sprintf("delivery %s is stored under hooks %s (each App or webhook that received it keeps its own): name one with ?hook=",
				guid, strings.Join(found, ", ")))
			p.Hooks = found
			abort(c, p)
			return
		}
	}
	out, err := s.deps.DeliveryRedeliverer.RedeliverDelivery(c.Request.Context(), RedeliveryRequest{
		GUID: guid, Hooks: hooks, By: claimsOf(c).Subject, RequestID: c.GetString(requestIDKey)})
	if errors.Is(err, ingest.ErrNotFound) {
		abort(c, newProblem(http.StatusNotFound, "not-found",
			fmt.Sprintf("no stored delivery %s under hook %s: unknown, or expired with the retention", guid, strings.Join(hooks, " or "))))
		return
	}
	if s.redeliveryFailed(c, "delivery redelivery", err) {
		return
	}
	c.JSON(http.StatusOK, out)
}

// redeliverEvent is POST /admin/events/{id}/redeliver?source=…[&party=…]
// [&subject=…]: 200 with who it was delivered to. The event is found by
// (source, id) in every journal shard; subject picks one when an id was
// journaled about two subjects (else 409). An id holding '/' is sent
// percent-encoded (%2F). 404 for an event not (or no longer) journaled.
func (s *Server) redeliverEvent(c *gin.Context) {
	id, source, party := c.Param("id"), c.Query("source"), c.Query("party")
	switch {
	case id == "" || len(id) > 1024:
		abort(c, newProblem(http.StatusBadRequest, "malformed", "the event id must be 1 to 1024 characters"))
		return
	case source == "" || len(source) > 1024:
		abort(c, newProblem(http.StatusBadRequest, "malformed", "source is required: the event's CloudEvents source, such as //github.com/org/repo or //wakegate/<ws>/<sub>"))
		return
	}
	if party != "" {
		if _, err := event.ParseParty(party); err != nil {
			abort(c, newProblem(http.StatusBadRequest, "malformed", err.Error()))
			return
		}
	}
	found, err := s.deps.Journal.Find(c.Request.Context(), source, id)
	if err != nil {
		s.fail(c, "journal", err)
		return
	}
	if subject, ok := c.GetQuery("subject"); ok {
		kept := found[:0]
		for _, e := range found {
			if e.Subject == subject {
				kept = append(kept, e)
			}
		}
		found = kept
	}
	switch len(found) {
	case 0:
		abort(c, newProblem(http.StatusNotFound, "not-found",
			fmt.Sprintf("no journaled event %q from %q: unknown, or no longer retained", id, source)))
		return
	case 1:
	default:
		subjects := make([]string, len(found))
		for i, e := range found {
			subjects[i] = e.Subject
		}
		abort(c, newProblem(http.StatusConflict, "conflict",
			"this (source, id) was journaled about several subjects ("+strings.Join(subjects, ", ")+"): name one with ?subject="))
		return
	}
	out, err := s.deps.EventRedeliverer.RedeliverEvent(c.Request.Context(), found[0], RedeliveryRequest{
		Party: party, By: claimsOf(c).Subject, RequestID: c.GetString(requestIDKey)})
	if s.redeliveryFailed(c, "event redelivery", err) {
		return
	}
	c.JSON(http.StatusOK, out)
}

// redeliveryFailed answers err, if any: a refusal as its problem, anything
// else as storage failing (503: retrying the request is safe).
func (s *Server) redeliveryFailed(c *gin.Context, what string, err error) bool {
	var refused *Refused
	switch {
	case err == nil:
		return false
	case errors.As(err, &refused):
		typ := "unprocessable"
		if refused.Status == http.StatusConflict {
			typ = "conflict"
		}
		abort(c, newProblem(refused.Status, typ, refused.Detail))
	default:
		s.fail(c, what, err)
	}
	return true
}
