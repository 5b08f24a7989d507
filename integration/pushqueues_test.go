package integration

import (
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/workers/tasks"
)

// pushQueues are the Asynq queues of a stack's pushes, hold releases and
// escalation timers, at the default WAKEGATE_PUSH_QUEUES.
func pushQueues(prefix string) []string { return tasks.Queues(prefix, tasks.DefaultQueues) }

// pushQueueOf is the queue of one recipient's tasks.
func pushQueueOf(prefix, ws, party string) string {
	return tasks.QueueFor(prefix, tasks.DefaultQueues, ws, party)
}

// dropPushQueues deletes a stack's push queues, their tasks and the stats
// DeleteQueue leaves; run it after the stack's processes have stopped.
func dropPushQueues(rdb redis.UniversalClient, prefix string) {
	insp := asynq.NewInspectorFromRedisClient(rdb)
	for _, q := range pushQueues(prefix) {
		_ = insp.DeleteQueue(q, true)
		redistest.Flush(rdb, "asynq:{"+q+"}")
	}
}

// pushQueueInfo sums the counts of a stack's push queues; a queue nothing
// was enqueued on yet counts zero.
func pushQueueInfo(insp *asynq.Inspector, prefix string) (asynq.QueueInfo, error) {
	known, err := insp.Queues()
	if err != nil {
		return asynq.QueueInfo{}, err
	}
	var sum asynq.QueueInfo
	for _, q := range pushQueues(prefix) {
		if !contains(known, q) {
			continue
		}
		qi, err := insp.GetQueueInfo(q)
		if err != nil {
			return sum, err
		}
		sum.Pending += qi.Pending
		sum.Active += qi.Active
		sum.Scheduled += qi.Scheduled
		sum.Retry += qi.Retry
		sum.Archived += qi.Archived
	}
	return sum, nil
}
