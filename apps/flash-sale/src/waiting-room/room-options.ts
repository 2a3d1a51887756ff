import { DomainRefusalError, invalidInput } from '../domain/refusals.js'

/** INVALID_REQUEST naming `field`, as the domain says it (the routes answer it as a 400). */
const invalid = (field: string, rule: string) => new DomainRefusalError(invalidInput(field, rule))

/**
 * A sale's waiting room, as `PUT /admin/sales/:id` takes it in `"waiting_room"` (snake_case in
 * JSON, the same names here). Absent or null: no room, checkouts need no ticket.
 */
export interface WaitingRoomOptions {
  /** Users let in per second (a token bucket holding at most one second's worth). */
  admit_per_second: number
  /** Admitted users holding a live admission (not yet bought, not lapsed) at once. */
  max_admitted: number
  /** How long an admission lasts: the time an admitted user has to buy. */
  admission_seconds: number
  /**
   * k: admitted users who have not bought yet stay at most k × the units left, so the room
   * never lets in many more people than there are units. At least 1. @defaultValue 2
   */
  stock_factor?: number
  /** A waiting place that is not polled for this long is dropped. @defaultValue 60 */
  drop_after_seconds?: number
}

export type ResolvedWaitingRoom = Required<WaitingRoomOptions>

/** The documented defaults of the optional fields. */
export const DEFAULT_WAITING_ROOM = Object.freeze({
  stock_factor: 2,
  drop_after_seconds: 60,
} satisfies Partial<WaitingRoomOptions>)

/** Ranges, one line each: the rule text is what a 400 says. */
const RULES = {
  admit_per_second: { min: 0.1, max: 100_000, integer: false },
  max_admitted: { min: 1, max: 100_000, integer: true },
  admission_seconds: { min: 10, max: 3_600, integer: true },
  stock_factor: { min: 1, max: 1_000, integer: false },
  drop_after_seconds: { min: 30, max: 3_600, integer: true },
} as const

type Field = keyof typeof RULES
const FIELDS = Object.keys(RULES) as Field[]
const REQUIRED: Field[] = ['admit_per_second', 'max_admitted', 'admission_seconds']

const rule = (f: Field) => {
  const r = RULES[f]
  return `${r.integer ? 'an integer' : 'a number'} from ${r.min} to ${r.max}`
}

/**
 * Validates the `waiting_room` field of the admin body: undefined/null → no room; anything else
 * must be an object of the fields above (unknown fields are refused, so a typo does not
 * silently leave a default in force). Throws a DomainRefusalError(INVALID_REQUEST) naming
 * `waiting_room.<field>`.
 */
export function parseWaitingRoom(value: unknown): ResolvedWaitingRoom | undefined {
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw invalid('waiting_room', `an object { ${REQUIRED.join(', ')} } or null`)
  }
  const input = value as Record<string, unknown>
  for (const name of Object.keys(input)) {
    if (!FIELDS.includes(name as Field)) {
      throw invalid(`waiting_room.${name}`, `unknown field; expected ${FIELDS.join(', ')}`)
    }
  }
  const out: Partial<ResolvedWaitingRoom> = {}
  for (const f of FIELDS) {
    const v = input[f] ?? (DEFAULT_WAITING_ROOM as Partial<Record<Field, number>>)[f]
    if (v === undefined) throw invalid(`waiting_room.${f}`, `required: ${rule(f)}`)
    const r = RULES[f]
    if (typeof v !== 'number' || !Number.isFinite(v) || v < r.min || v > r.max) {
      throw invalid(`waiting_room.${f}`, rule(f))
    }
    if (r.integer && !Number.isInteger(v)) throw invalid(`waiting_room.${f}`, rule(f))
    out[f] = v
  }
  return out as ResolvedWaitingRoom
}
