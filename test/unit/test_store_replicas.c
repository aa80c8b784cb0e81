/* store_replicas_online: the replicas a primary's INFO replication lists
 * online (what a write waits for, store.h), from the reply's text. */
#include <hiredis/hiredis.h>
#include <string.h>

#include "store.h"
#include "test.h"

static int count(int type, const char *text) {
    redisReply r = {.type = type, .str = (char *)text, .len = strlen(text)};
    return store_replicas_online(&r);
}

TEST(store_replicas_online_counts_online_replicas) {
    CHECK_I64(count(REDIS_REPLY_STRING, "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"), 0);
    CHECK_I64(count(REDIS_REPLY_STRING,
                    "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n"
                    "slave0:ip=127.0.0.1,port=7001,state=online,offset=215,lag=0\r\n"
                    "slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n"
                    "slave2:ip=127.0.0.1,port=7003,state=online,offset=215,lag=1\r\n"),
              2);
    /* a replica's answer, another reply, none */
    CHECK_I64(count(REDIS_REPLY_STRING, "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\n"), -1);
    CHECK_I64(count(REDIS_REPLY_ERROR, "ERR unknown"), -1);
    CHECK_I64(store_replicas_online(NULL), -1);
    CHECK_I64(count(REDIS_REPLY_STRING, ""), -1);
}
