package reconciletest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// NeedRedisBloom skips the test unless the server c reaches has the
// RedisBloom module loaded (scripts/services load it when they find it:
// redisbloom-module.sh), or fails it when $CI is set: in CI a test against
// the module never passes by not running.
func NeedRedisBloom(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	err := c.Do(context.Background(), "BF.INFO", "reconciletest:none").Err()
	if err != nil && err.Error() == "ERR not found" {
		return
	}
	why := "the test Redis has no RedisBloom module (BF.INFO answered " + strings.TrimSpace(errString(err)) + "): scripts/services load it from $FPDEDUP_REDISBLOOM or shared/redisbloom/redisbloom.so above the repo"
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
