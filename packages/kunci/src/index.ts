// cluster
export { hashTag, keySlot, SLOT_COUNT } from './cluster/slot.js'
