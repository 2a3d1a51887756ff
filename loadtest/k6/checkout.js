// The source articles' k6 scenario against the flash-sale checkout: ramp to 100 virtual users in
// 30 s, to 500 over 1 min, back to 0 in 30 s; each VU buys product 9921 as a random user and
// sleeps 0.1 s. Type-checked with @types/k6 (loadtest/k6/tsconfig.json, part of `npm run typecheck`).
//
//   k6 run loadtest/k6/checkout.js                                  # http://127.0.0.1:8080
//   k6 run -e BASE_URL=http://checkout.example:8080 loadtest/k6/checkout.js
//
// Reading the checks: once the 100 units are gone every answer is 409 SOLD_OUT, so "status is
// 200 or 429" is expected to fail for most requests of a sale (that share is the sold-out
// share); "sold out is 409" holds when every SOLD_OUT answer carries status 409. What must not
// happen is an error: 5xx or no answer at all, which the `errors` rate counts and its threshold
// fails the run on.
import { check, sleep } from 'k6'
import http from 'k6/http'
import { Rate } from 'k6/metrics'

const BASE_URL = __ENV.BASE_URL || 'http://127.0.0.1:8080'

/** Requests that got no answer or a 5xx: the service failed, not the sale. */
export const errors = new Rate('errors')

/** @type {import('k6/options').Options} */
export const options = {
  stages: [
    { duration: '30s', target: 100 },
    { duration: '1m', target: 500 },
    { duration: '30s', target: 0 },
  ],
  thresholds: {
    // At most 1 % of requests may fail outright (a killed Redis node costs a little, not more).
    errors: ['rate<0.01'],
    http_req_duration: ['p(99)<1500'],
  },
}

// 409 (sold out, already bought) and 429 (busy, retry) are answers, not failures.
http.setResponseCallback(http.expectedStatuses(200, 202, 409, 429))

/**
 * @param {import('k6/http').RefinedResponse<'text'>} res
 * @returns {string | undefined} the JSON body's error.code, if any
 */
function errorCode(res) {
  try {
    const body = /** @type {{ error?: { code?: string } }} */ (res.json())
    return body.error?.code
  } catch {
    return undefined
  }
}

export default function () {
  const payload = JSON.stringify({ product_id: 9921, user_id: Math.floor(Math.random() * 100000) })
  const res = http.post(`${BASE_URL}/v1/checkout`, payload, {
    headers: { 'Content-Type': 'application/json' },
    tags: { name: 'checkout' },
  })
  check(res, {
    // 202: the order was accepted into the queue, the service's success answer besides 200.
    'status is 200 or 429': (r) => r.status === 200 || r.status === 202 || r.status === 429,
    'response under 500 ms': (r) => r.timings.duration < 500,
    'sold out is 409': (r) => errorCode(r) !== 'SOLD_OUT' || r.status === 409,
  })
  errors.add(res.status === 0 || res.status >= 500)
  sleep(0.1)
}
