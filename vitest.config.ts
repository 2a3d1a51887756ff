import { relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'
import { BaseSequencer, type TestSpecification } from 'vitest/node'

const src = (p: string) => fileURLToPath(new URL(p, import.meta.url))
const root = src('./')

/**
 * Seconds the slowest files took in one full run (2026-12-07, the shared 2-core machine, so
 * relative sizes only). Refresh with `npx vitest run --reporter=json --outputFile=…` when a file
 * grows a lot; a file not listed counts as quick.
 */
const SLOW_FILES_S: Readonly<Record<string, number>> = {
  'apps/flash-sale/test/crowd/fault-generator.test.ts': 190,
  'apps/flash-sale/test/crowd/partition-crowd.test.ts': 159,
  'packages/kunci/test/model/model.test.ts': 111,
  'apps/flash-sale-lab/test/integration/demo.test.ts': 110,
  'apps/flash-sale/test/integration/checkout-redlock.test.ts': 74,
  'apps/flash-sale/test/integration/waiting-room-stack.test.ts': 64,
  'apps/flash-sale/test/integration/persist-batch-stack.test.ts': 53,
  'apps/flash-sale/test/model/checkout-model.test.ts': 50,
  'apps/flash-sale/test/crowd/failover-crowd.test.ts': 50,
  // Builds the image (~50 s on a fresh machine, the local base ~25 s more), then runs it.
  'deploy/test/integration/image.test.ts': 80,
  'apps/flash-sale/test/integration/amqp.test.ts': 42,
  'apps/flash-sale/test/crowd/failover-crowd-loop.test.ts': 41,
  'apps/flash-sale/test/crowd/failover-crowd-redlock.test.ts': 35,
  'apps/flash-sale/test/integration/drain.test.ts': 32,
  'apps/flash-sale/test/integration/observe-stack.test.ts': 26,
  'apps/flash-sale/test/integration/waiting-room-failover.test.ts': 23,
  'packages/topology/test/network.test.ts': 23,
  'packages/kunci/test/integration/clients/redlock.test.ts': 23,
  'apps/flash-sale-lab/test/integration/embedded-sql.test.ts': 23,
  'packages/kunci/test/integration/clients/redis-lock-wait.test.ts': 22,
  'apps/flash-sale/test/integration/hold-sweeper-stack.test.ts': 22,
  'packages/kunci/test/integration/redlock-restart.test.ts': 19,
  'packages/kunci/test/integration/cache-cluster.test.ts': 19,
  'packages/kunci/test/integration/redlock-faults.test.ts': 18,
  'packages/kunci/test/integration/redlock-restart-clock.test.ts': 15,
}

/**
 * Longest first within each project, from the table above, whether or not Vitest has a cache of
 * durations (a fresh clone has none, and Vitest then starts the largest files, not the longest):
 * with two workers, a 110 s file started last keeps one worker busy while the other idles.
 */
class SlowestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files)
    const seconds = (f: TestSpecification) => SLOW_FILES_S[relative(root, f.moduleId)] ?? 0
    const rank = new Map(sorted.map((f, i) => [f, i]))
    return sorted.sort(
      (a, b) =>
        a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder ||
        (a.project.name === b.project.name ? 0 : a.project.name < b.project.name ? -1 : 1) ||
        seconds(b) - seconds(a) ||
        rank.get(a)! - rank.get(b)!,
    )
  }
}

// Two projects: fast unit tests run in parallel; integration tests start their own
// redis-server processes on free ports (never 6379) and are given longer time-outs.
export default defineConfig({
  // Tests run against the sources, so no build is needed while iterating (except by the tests that
  // start a local stack: its service processes run the built CLI, @kunci/flash-sale/cli).
  resolve: {
    alias: {
      '@kunci/flash-sale-lab': src('./apps/flash-sale-lab/src/index.ts'),
      '@kunci/flash-sale': src('./apps/flash-sale/src/index.ts'),
      '@kunci/topology': src('./packages/topology/src/index.ts'),
      kunci: src('./packages/kunci/src/index.ts'),
    },
  },
  test: {
    globals: false,
    sequence: { sequencer: SlowestFirst },
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: [
            'packages/*/test/unit/**/*.test.ts',
            // The lock protocol's model: CPU only (spin), no servers; here rather than beside the
            // integration tests, whose deadlines a CPU-bound neighbour would stretch.
            'packages/kunci/test/model/**/*.test.ts',
            'apps/*/test/model/**/*.test.ts',
            'apps/*/test/unit/**/*.test.ts',
            'deploy/test/*.test.ts',
            'bench/test/**/*.test.ts',
          ],
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          // Runs after the unit project, with its own worker limit (each file starts servers).
          sequence: { groupOrder: 1 },
          include: [
            'packages/*/test/integration/**/*.test.ts',
            'packages/topology/test/**/*.test.ts',
            'apps/*/test/integration/**/*.test.ts',
            // Builds the service's image and runs it as the manifests do (podman or docker).
            'deploy/test/integration/**/*.test.ts',
          ],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          fileParallelism: true,
          maxWorkers: 2,
        },
      },
      {
        extends: true,
        test: {
          name: 'crowd',
          // Faults under the load of a retrying crowd (hundreds of clients on this machine's two
          // cores): each file has the machine to itself, after the others, so that what it
          // measures (recovery within 5 s, deadlines) is the service and not a neighbour's load.
          sequence: { groupOrder: 2 },
          include: ['apps/*/test/crowd/**/*.test.ts'],
          testTimeout: 240_000,
          hookTimeout: 120_000,
          fileParallelism: false,
          maxWorkers: 1,
        },
      },
    ],
  },
})
