package stack

import (
	"context"
	"errors"
	"net/http"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/workers/derive"
	"github.com/wakegate/wakegate/workers/route"
)

// The operators' redeliveries (docs/design.md §11) run in the gateway's process on
// the workers' code: the gateway has Redis, so it re-derives with the
// deriver's normalization and the tracker, and routes with the stack's
// router, and answers what it did. No task crosses to the workers, and gin
// stays in the gateway.

// redeliverers are the gateway's two redeliver dependencies.
func (s *Stack) redeliverers() (*deliveryRedeliverer, *eventRedeliverer) {
	return &deliveryRedeliverer{derive.NewRedeliverer(s.Ingest, s.Tracker, s.Journal), s.Ingest}, &eventRedeliverer{s.Router}
}

type deliveryRedeliverer struct {
	r  *derive.Redeliverer
	in *ingest.Store
}

func (d *deliveryRedeliverer) DeliveryHooks(ctx context.Context, guid string) ([]string, error) {
	return d.in.Hooks(ctx, guid)
}

func (d *deliveryRedeliverer) RedeliverDelivery(ctx context.Context, req gateway.RedeliveryRequest) (any, error) {
	out, err := d.r.Redeliver(ctx, derive.Request{GUID: req.GUID, Hooks: req.Hooks, By: req.By, RequestID: req.RequestID})
	if errors.Is(err, derive.ErrUnderivable) {
		return nil, &gateway.Refused{Status: http.StatusUnprocessableEntity, Detail: err.Error()}
	}
	return out, err
}

type eventRedeliverer struct{ r *route.Router }

func (e *eventRedeliverer) RedeliverEvent(ctx context.Context, ev *event.Event, req gateway.RedeliveryRequest) (any, error) {
	out, err := e.r.Redeliver(ctx, ev, route.RedeliverRequest{Party: req.Party, By: req.By, RequestID: req.RequestID})
	switch {
	case errors.Is(err, route.ErrNotRoutable):
		return nil, &gateway.Refused{Status: http.StatusUnprocessableEntity, Detail: ev.Type + " is an internal event: " + err.Error()}
	case errors.Is(err, route.ErrInProgress):
		return nil, &gateway.Refused{Status: http.StatusConflict, Detail: err.Error() + "; retry in a few seconds to get its answer"}
	}
	return out, err
}
