// `run.ts --profile DIR`: loaded into every service and worker process of the profiled targets
// with NODE_OPTIONS=--import (Node 20 refuses --cpu-prof in NODE_OPTIONS). V8's sampling profiler
// through node:inspector, toggled by SIGUSR2: the bench sends one when a run's measured window
// starts and one when it ends, and each window is written to
// DIR/<pid>-<n>.cpuprofile (Chrome DevTools format). DIR is CPU_PROFILE_DIR.
import { mkdirSync, writeFileSync } from 'node:fs'
import { Session } from 'node:inspector'
import { join } from 'node:path'

const dir = process.env.CPU_PROFILE_DIR
if (dir) {
  mkdirSync(dir, { recursive: true })
  const session = new Session()
  session.connect()
  session.post('Profiler.enable')
  session.post('Profiler.setSamplingInterval', { interval: 1_000 })
  let running = false
  let n = 0
  const stop = () => {
    running = false
    // A same-thread session answers synchronously (so this also works in an 'exit' handler).
    session.post('Profiler.stop', (err, result) => {
      if (!err) writeFileSync(join(dir, `${process.pid}-${++n}.cpuprofile`), JSON.stringify(result.profile))
    })
  }
  process.on('SIGUSR2', () => {
    if (running) stop()
    else {
      running = true
      session.post('Profiler.start')
    }
  })
  process.once('exit', () => {
    if (running) stop()
  })
}
