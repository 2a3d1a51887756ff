import { subscribe, unsubscribe } from 'node:diagnostics_channel'

/** The lock events the demo reports, collected from kunci's diagnostics channels (see docs/locks.md). */
export class LockEvents {
  contention = 0
  acquired = 0
  lost = 0
  nodeErrors = 0
  failed = new Map<string, number>()
  /** Quarantines started, and per node index the performance.now() at which the last one ends. */
  quarantines = 0
  readonly quarantinedUntil = new Map<number, number>()
  #handlers: [string, (message: unknown) => void][] = []

  constructor() {
    this.#on('kunci:lock:contention', () => this.contention++)
    this.#on('kunci:lock:acquired', () => this.acquired++)
    this.#on('kunci:lock:lost', () => this.lost++)
    this.#on('kunci:lock:node-error', () => this.nodeErrors++)
    this.#on('kunci:lock:failed', (m) => {
      const { code } = m as { code: string }
      this.failed.set(code, (this.failed.get(code) ?? 0) + 1)
    })
    this.#on('kunci:lock:quarantined', (m) => {
      const { node, quarantineMs } = m as { node: number; quarantineMs: number }
      this.quarantines++
      const until = performance.now() + quarantineMs
      if (until > (this.quarantinedUntil.get(node) ?? 0)) this.quarantinedUntil.set(node, until)
    })
  }

  isQuarantined(node: number): boolean {
    return (this.quarantinedUntil.get(node) ?? 0) > performance.now()
  }

  close(): void {
    for (const [name, fn] of this.#handlers) unsubscribe(name, fn)
    this.#handlers = []
  }

  #on(name: string, fn: (message: unknown) => void): void {
    subscribe(name, fn)
    this.#handlers.push([name, fn])
  }
}
