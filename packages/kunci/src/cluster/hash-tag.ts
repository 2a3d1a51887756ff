/**
 * Building keys that Redis Cluster keeps in one hash slot, so that multi-key commands, Lua
 * scripts and MULTI/EXEC over them work (otherwise the server answers CROSSSLOT).
 *
 * A hash tag is cheap but not free: every key with the same tag lives on one master. Tag per
 * entity (`{product:9921}`), never per table or per app (`{products}`), or one node takes all
 * the load and memory. See docs/cluster.md.
 */
import { InvalidOptionError } from '../errors.js'
import { keySlot } from './slot.js'

/** Separator placed between the tag and each part: `{tag}:part1:part2`. */
export const KEY_PART_SEPARATOR = ':'

/**
 * `{tag}:part1:part2…`: a key whose slot depends only on `tag`, so every key built with the
 * same tag lands in the same slot.
 *
 * The tag must be a non-empty string without `{` or `}`: an empty tag (`{}`) would make Redis
 * hash the whole key, and a brace inside the tag would end it early or move it, so the keys
 * would silently scatter. Parts must be non-empty strings (an empty part is nearly always a
 * missing id); braces are allowed in parts since only the first `{…}` counts.
 *
 * @example taggedKey('product:9921', 'stock') === '{product:9921}:stock'
 * @throws InvalidOptionError when the tag or a part is invalid.
 */
export function taggedKey(tag: string, ...parts: string[]): string {
  assertValidTag(tag)
  let key = '{' + tag + '}'
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]
    if (typeof part !== 'string' || part.length === 0) {
      throw new InvalidOptionError(
        `parts[${i}]`,
        `each key part must be a non-empty string, got ${part === '' ? 'an empty string' : typeof part}. ` +
          'Pass the id or name the key is about.',
      )
    }
    key += KEY_PART_SEPARATOR + part
  }
  return key
}

/**
 * Throws `InvalidOptionError` unless `tag` can be used as a hash tag as-is: a non-empty string
 * with no `{` or `}`.
 */
export function assertValidTag(tag: string, option = 'tag'): void {
  if (typeof tag !== 'string' || tag.length === 0) {
    throw new InvalidOptionError(
      option,
      'a hash tag must be a non-empty string (an empty tag `{}` makes Redis hash the whole key). ' +
        'Use the id of the entity the keys belong to, e.g. "product:9921".',
    )
  }
  if (tag.includes('{') || tag.includes('}')) {
    throw new InvalidOptionError(
      option,
      `a hash tag must not contain "{" or "}" (got ${JSON.stringify(tag)}): Redis would end or move the tag ` +
        'and the keys would not share a slot. Remove the braces.',
    )
  }
}

/** True when every key maps to the same slot (vacuously true for zero or one key). */
export function sameSlot(keys: Iterable<string | Uint8Array>): boolean {
  let first = -1
  for (const key of keys) {
    const slot = keySlot(key)
    if (first === -1) first = slot
    else if (slot !== first) return false
  }
  return true
}

/**
 * Groups keys by slot, keeping their order inside each group, so that each group can go in one
 * multi-key command (UNLINK, MGET…) without CROSSSLOT.
 */
export function groupBySlot<K extends string | Uint8Array>(keys: Iterable<K>): Map<number, K[]> {
  const groups = new Map<number, K[]>()
  for (const key of keys) {
    const slot = keySlot(key)
    const group = groups.get(slot)
    if (group) group.push(key)
    else groups.set(slot, [key])
  }
  return groups
}
