/**
 * kunci's own scripts: a `Script` (script.ts, the runner) read from a `.lua` file beside its
 * module, plus what the lock node link needs to batch it. The build copies the `.lua` files
 * next to the compiled JS, so the same URL works from `src/` and `dist/`.
 */
import { Script } from './script.js'

export interface BatchForm {
  readonly script: LuaScript
  pack(args: readonly (string | number)[]): readonly (string | number)[]
}

export interface LuaScriptOptions {
  /** For batched scripts: how many reply elements each request gets (a flat array). @defaultValue 1 */
  readonly replyWidth?: number
  /**
   * For a lean single-request script: the batched script that serves several such requests in
   * one call, and how to turn one request's arguments into that script's per-request arguments.
   * A request alone in its tick runs this script with its own arguments (no batch prefix).
   */
  readonly batchAs?: BatchForm
  /**
   * For a lean script: turns its reply into the value the batched script gives one request
   * (lean scripts answer with a bare integer where they can: no Lua table to build, no array
   * to parse). `undefined` means the reply is malformed.
   */
  readonly decodeLone?: (reply: unknown) => unknown
}

export interface LuaScript extends Script {
  readonly replyWidth: number
  readonly batchAs?: BatchForm | undefined
  readonly decodeLone?: ((reply: unknown) => unknown) | undefined
}

/** Loads `fileUrl` (use `new URL('./scripts/x.lua', import.meta.url)`), hashed once. */
export function loadScript(fileUrl: URL, options: LuaScriptOptions = {}): LuaScript {
  const script = Script.fromFile(fileUrl)
  return Object.freeze(
    Object.assign(script, {
      replyWidth: options.replyWidth ?? 1,
      batchAs: options.batchAs,
      decodeLone: options.decodeLone,
    }),
  )
}
