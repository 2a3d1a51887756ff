#!/usr/bin/env node
// `flash-sale-lab`: the tools that drive the service (up, load, demo); the service's own commands
// (serve, worker, migrate, reconcile) are passed on to its CLI, `flash-sale`.
import { type Command, dispatch } from '@kunci/flash-sale'
import { demoCommand } from './demo.js'
import { loadCommand } from './load.js'
import { SERVICE_COMMANDS } from './service.js'
import { upCommand } from './up.js'

const COMMANDS: Command[] = [upCommand, ...SERVICE_COMMANDS, loadCommand, demoCommand]

process.exitCode = await dispatch('flash-sale-lab', COMMANDS, process.argv.slice(2))
