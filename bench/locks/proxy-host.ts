/**
 * The lock bench's links with a round trip (--link-ms, issue 24's lock at C=1 on realistic
 * links): topology's FaultProxy in front of each node, delaying the way to the node only, so a
 * round trip gains about the delay (timers fire on whole milliseconds: 1 ms is ~1.1 ms). In a
 * process of their own, so that the proxies' timers and copies are not charged to the library the
 * bench measures. (The kernel's netem would be finer, but this machine's kernel has no sch_netem:
 * `tc qdisc add … netem` answers "Specified qdisc kind is unknown".)
 *
 *   node --import tsx bench/locks/proxy-host.ts '{"targets":[{"host":"127.0.0.1","port":…}],"latencyMs":1}'
 *
 * Prints one line {"ready":true,"ports":[…]} (a proxy port per target, in order); stops on
 * SIGTERM or when stdin closes (the bench went away).
 */
import { startProxy } from '@kunci/topology'

interface Options {
  targets: { host: string; port: number }[]
  latencyMs: number
}

const options = JSON.parse(process.argv[2] ?? '{}') as Options
if (!Array.isArray(options.targets) || !(options.latencyMs >= 0)) {
  process.stderr.write('usage: proxy-host.ts \'{"targets":[{"host":…,"port":…}],"latencyMs":N}\'\n')
  process.exit(2)
}
const proxies = await Promise.all(options.targets.map((t) => startProxy(t)))
for (const p of proxies) p.setLatency(options.latencyMs, 0, 'to-node')
process.stdout.write(`${JSON.stringify({ ready: true, ports: proxies.map((p) => p.port) })}\n`)

let stopping = false
const stop = async () => {
  if (stopping) return
  stopping = true
  await Promise.allSettled(proxies.map((p) => p.close()))
  process.exit(0)
}
process.once('SIGTERM', () => void stop())
process.stdin.on('close', () => void stop())
process.stdin.resume()
