import { ReplyError } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { isRedirect, isRedisOutage } from '../../src/redis/redis-errors.js'
import { TimeoutError } from '../../src/runtime-timeout.js'
import { UnexpectedScriptReplyError } from '../../src/sale/sale-store.js'

const named = (name: string, message: string) => Object.assign(new Error(message), { name })
const coded = (code: string, message = code) => Object.assign(new Error(message), { code })

describe('isRedisOutage: everything a fault can raise is an outage (503), never a 500', () => {
  it.each([
    // Issue 13: a command bounced between a dead master's closed connection and MOVED replies.
    new Error('Too many Cluster redirections. Last error: ReplyError: MOVED 15091 127.0.0.1:23627'),
    new Error('Connection is closed.'),
    new Error("Cluster isn't ready and enableOfflineQueue options is false"),
    new Error('Cluster is disconnected.'),
    new Error('Node is disconnected'),
    new Error("Stream isn't writeable and enableOfflineQueue options is false"),
    new Error('Failed to refresh slots cache.'),
    new Error('None of startup nodes is available'),
    new Error('Command timed out'),
    new Error("Socket timeout. Expecting data, but didn't receive any in 1000ms."),
    new Error('connect ETIMEDOUT'),
    new Error('Ready check failed: LOADING Redis is loading the dataset in memory'),
    named(
      'MaxRetriesPerRequestError',
      'Reached the max retries per request limit (which is 2). Refer to "maxRetriesPerRequest" option for details.',
    ),
    named('ClusterAllFailedError', 'Failed to refresh slots cache.'),
    named('AbortError', 'Command aborted due to connection close'),
    new TimeoutError(2_000),
    coded('ECONNREFUSED'),
    coded('ECONNRESET'),
    coded('ETIMEDOUT'),
    coded('EPIPE'),
    coded('EHOSTUNREACH'),
    new ReplyError('CLUSTERDOWN The cluster is down'),
    new ReplyError('TRYAGAIN Multiple keys request during rehashing of slot'),
    new ReplyError('LOADING Redis is loading the dataset in memory'),
    new ReplyError('MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to no'),
    new ReplyError("READONLY You can't write against a read only replica."),
    new ReplyError('MOVED 3999 127.0.0.1:6381'),
    new ReplyError('ASK 3999 127.0.0.1:6381'),
    new ReplyError('BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.'),
    new ReplyError("OOM command not allowed when used memory > 'maxmemory'."),
    new ReplyError('NOAUTH Authentication required.'),
    new ReplyError(
      'UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)',
    ),
    new ReplyError('ERR max number of clients reached'),
  ])('$message', (err) => {
    expect(isRedisOutage(err)).toBe(true)
  })

  it.each([
    new ReplyError('NOSCRIPT No matching script. Please use EVAL.'),
    new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value'),
    new ReplyError(
      'ERR Error running script (call to f_x): @user_script:1: Script attempted to access a non local key in a cluster node',
    ),
    new UnexpectedScriptReplyError('reserve', [1, 2]),
    new TypeError("Cannot read properties of undefined (reading 'x')"),
  ])('not an outage (a bug or a script to reload): $message', (err) => {
    expect(isRedisOutage(err)).toBe(false)
  })

  it('only errors count', () => {
    expect(isRedisOutage('Connection is closed.')).toBe(false)
    expect(isRedisOutage(undefined)).toBe(false)
  })
})

describe('isRedirect', () => {
  it('MOVED/ASK/TRYAGAIN/CLUSTERDOWN: the command did not run and may be resent', () => {
    for (const m of ['MOVED 1 h:1', 'ASK 1 h:1', 'TRYAGAIN x', 'CLUSTERDOWN x'])
      expect(isRedirect(new ReplyError(m))).toBe(true)
    expect(isRedirect(new ReplyError('READONLY x'))).toBe(false)
  })
})
