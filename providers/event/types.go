package event

// The event types of the vocabulary (docs/design.md §2), and those the
// server acts on. Code outside this package names a type by its
// constant, never by a string literal (TestNoTypeLiteralOutsideEvent).
const (
	TypeSessionCrashed             = "session.crashed"
	TypeSessionPermissionRequested = "session.permission_requested"
	TypeSessionAwaitingInput       = "session.awaiting_input"
	TypeSessionTurnEnded           = "session.turn_ended"
	TypeSessionStalled             = "session.stalled"
	TypeSessionExited              = "session.exited"
	TypeSessionSpawned             = "session.spawned"
	TypeSessionResumed             = "session.resumed"
	TypeSessionReaped              = "session.reaped"
	TypeSessionTurnStarted         = "session.turn_started"
	TypeSessionHandoffSuggested    = "session.handoff_suggested"
	TypeSessionPaused              = "session.paused"
	TypeSessionPrompted            = "session.prompted"
	TypeSessionPrOpened            = "session.pr_opened"

	TypeMessageSent = "message.sent"

	TypePolicyFailed = "policy.failed"
	TypePolicyDone   = "policy.done"

	TypeCronUnhealthy = "cron.unhealthy"

	TypeGitHubPullRequestOpened           = "github.pull_request.opened"
	TypeGitHubPullRequestReopened         = "github.pull_request.reopened"
	TypeGitHubPullRequestLinked           = "github.pull_request.linked"
	TypeGitHubPullRequestReady            = "github.pull_request.ready"
	TypeGitHubPullRequestChecksFailed     = "github.pull_request.checks_failed"
	TypeGitHubPullRequestClosed           = "github.pull_request.closed"
	TypeGitHubPullRequestDequeued         = "github.pull_request.dequeued"
	TypeGitHubPullRequestStuck            = "github.pull_request.stuck"
	TypeGitHubPullRequestReviewSubmitted  = "github.pull_request_review.submitted"
	TypeGitHubPullRequestSynchronize      = "github.pull_request.synchronize"
	TypeGitHubPullRequestConvertedToDraft = "github.pull_request.converted_to_draft"
	TypeGitHubPullRequestReadyForReview   = "github.pull_request.ready_for_review"
	TypeGitHubPullRequestEdited           = "github.pull_request.edited"
	TypeGitHubPullRequestLabeled          = "github.pull_request.labeled"
	TypeGitHubCheckSuiteCompleted         = "github.check_suite.completed"
	TypeGitHubCheckRunCompleted           = "github.check_run.completed"
	TypeGitHubStatus                      = "github.status"
	TypeGitHubDeploymentStatus            = "github.deployment_status"
	TypeGitHubIssueCommentCreated         = "github.issue_comment.created"
	TypeGitHubPing                        = "github.ping"

	TypeWakegateFaultUndeliverable = "wakegate.fault.undeliverable"
	TypeWakegateEscalated          = "wakegate.escalated"
	TypeWakegateDigest             = "wakegate.digest"
	TypeWakegateLinkConflict       = "wakegate.link_conflict"
	TypeWakegateLinkRefused        = "wakegate.link_refused"
	TypeWakegateRedelivered        = "wakegate.redelivered"

	TypeSessionHeartbeat = "session.heartbeat"
)
