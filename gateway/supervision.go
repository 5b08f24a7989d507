package gateway

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// Stubs, being implemented: subscriptions, supervision, messages and
// workspace settings (DESIGN §6).

func notYet(c *gin.Context) {
	abort(c, newProblem(http.StatusNotImplemented, "internal", "not implemented yet"))
}

func (s *Server) createSubscription(c *gin.Context)      { notYet(c) }
func (s *Server) listSubscriptions(c *gin.Context)       { notYet(c) }
func (s *Server) deleteSubscription(c *gin.Context)      { notYet(c) }
func (s *Server) supervise(c *gin.Context)               { notYet(c) }
func (s *Server) release(c *gin.Context)                 { notYet(c) }
func (s *Server) supervision(c *gin.Context)             { notYet(c) }
func (s *Server) sendMessage(c *gin.Context)             { notYet(c) }
func (s *Server) getWorkspaceSupervision(c *gin.Context) { notYet(c) }
func (s *Server) putWorkspaceSupervision(c *gin.Context) { notYet(c) }
func (s *Server) brief(c *gin.Context)                   { notYet(c) }
