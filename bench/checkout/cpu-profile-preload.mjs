// `run.ts --profile DIR`: loaded into every service and worker process with
// NODE_OPTIONS=--import (Node 20 refuses --cpu-prof in NODE_OPTIONS). Starts V8's sampling
// profiler through node:inspector and writes DIR/<pid>.cpuprofile (Chrome DevTools format) when
// the process exits; a process killed with SIGKILL writes nothing. DIR is CPU_PROFILE_DIR.
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
  session.post('Profiler.start')
  process.once('exit', () => {
    // A same-thread session answers synchronously, so this runs before the process is gone.
    session.post('Profiler.stop', (err, result) => {
      if (!err) writeFileSync(join(dir, `${process.pid}.cpuprofile`), JSON.stringify(result.profile))
    })
  })
}
