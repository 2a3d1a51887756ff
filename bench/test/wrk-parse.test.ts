import { describe, expect, it } from 'vitest'
import { parseWrk } from '../checkout/wrk.js'

// wrk 4.1's report, as `wrk --latency` prints it (a real run against bench/checkout/bare-server.ts).
const REPORT = `Running 1s test @ http://127.0.0.1:18998/v1/checkout
  1 threads and 4 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   567.03us    1.12ms  16.77ms   93.33%
    Req/Sec    12.44k     8.61k   25.99k    63.64%
  Latency Distribution
     50%  238.00us
     75%  509.00us
     90%    1.11ms
     99%    5.78ms
  13579 requests in 1.10s, 2.80MB read
  Socket errors: connect 0, read 2, write 0, timeout 3
  Non-2xx or 3xx responses: 13570
Requests/sec:  12347.59
Transfer/sec:      2.54MB
`

describe('parseWrk', () => {
  it('reads the rate, the percentiles in ms whatever their unit, the refusals and the socket errors', () => {
    expect(parseWrk(REPORT)).toEqual({
      requests: 13579,
      seconds: 1.1,
      requestsPerSecond: 12347.59,
      non2xx: 13570,
      socketErrors: 5,
      p50Ms: 0.238,
      p90Ms: 1.11,
      p99Ms: 5.78,
    })
  })

  it('a report without refusals or socket errors counts none of them', () => {
    const clean = REPORT.replace(/ {2}Socket errors.*\n/, '').replace(/ {2}Non-2xx.*\n/, '')
    const r = parseWrk(clean)
    expect(r.non2xx).toBe(0)
    expect(r.socketErrors).toBe(0)
    expect(r.requests).toBe(13579)
  })
})
