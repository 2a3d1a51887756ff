import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

const src = (p: string) => fileURLToPath(new URL(p, import.meta.url))

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
            'apps/*/test/unit/**/*.test.ts',
            'deploy/test/**/*.test.ts',
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
