// Parses CLUSTER NODES output: one node's opinion of the cluster at one moment.
// Line format: <id> <ip:port@cport[,hostname]> <flags> <master-id|-> <ping-sent> <pong-recv>
//              <config-epoch> <link-state> <slot or range>... [<slot>->-<id> migrating entries]

export interface ClusterViewEntry {
  id: string
  port: number
  flags: string[]
  /** The master's id for a replica, undefined for a master. */
  masterId: string | undefined
  linkState: string
  /** Owned slots as inclusive [start, end] ranges (migrating/importing markers left out). */
  slots: [number, number][]
}

export function parseClusterNodes(text: string): ClusterViewEntry[] {
  const entries: ClusterViewEntry[] = []
  for (const line of text.split('\n')) {
    const parts = line.trim().split(' ')
    if (parts.length < 8) continue
    const [id, address, flags, master, , , , linkState, ...slotParts] = parts
    const port = Number(/:(\d+)@/.exec(address!)?.[1])
    const slots: [number, number][] = []
    for (const s of slotParts) {
      if (s.startsWith('[')) continue
      const [start, end = start] = s.split('-')
      slots.push([Number(start), Number(end)])
    }
    entries.push({
      id: id!,
      port,
      flags: flags!.split(','),
      masterId: master === '-' ? undefined : master,
      linkState: linkState!,
      slots,
    })
  }
  return entries
}

export function isFailing(entry: ClusterViewEntry): boolean {
  return entry.flags.includes('fail') || entry.flags.includes('fail?') || entry.flags.includes('noaddr')
}

export function isMaster(entry: ClusterViewEntry): boolean {
  return entry.flags.includes('master')
}

export function ownsSlot(entry: ClusterViewEntry, slot: number): boolean {
  return entry.slots.some(([start, end]) => slot >= start && slot <= end)
}

/** `field:value` lines of INFO / CLUSTER INFO as a map. */
export function parseInfo(text: string): Map<string, string> {
  const map = new Map<string, string>()
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(':')
    if (i > 0) map.set(line.slice(0, i), line.slice(i + 1).trim())
  }
  return map
}
