// The lab's public entry: the tools that drive the flash-sale service, for the service's own
// integration tests (a whole local stack) and bench/checkout. None of this ships with the service.
export { type LoadOptions, type LoadResult, runLoad } from './load/index.js'
export { type StackProcess, serviceCliPath } from './stack/child.js'
export {
  LAB_WALLET_BALANCE,
  type LocalStack,
  type SaleSpec,
  type StackOptions,
  startStack,
} from './stack/local-stack.js'
