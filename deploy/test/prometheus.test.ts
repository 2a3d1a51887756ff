/**
 * The alert rules pass `promtool check rules`, their unit tests pass `promtool test rules`, and
 * every alert has at least one test case that expects it to fire.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { allRules } from '../src/prometheus/rules.js'

const PROM_DIR = fileURLToPath(new URL('../prometheus/', import.meta.url))
const REPO = fileURLToPath(new URL('../../', import.meta.url))

beforeAll(() => {
  // Installs Debian's prometheus package when missing (as root), or fails with the command to run.
  execFileSync('node', ['scripts/ensure-tools.mjs', 'promtool'], {
    cwd: REPO,
    stdio: 'inherit',
    env: { ...process.env, KUNCI_QUIET: '1' },
  })
}, 300_000)

function promtool(args: string[]) {
  return spawnSync('promtool', args, { cwd: PROM_DIR, encoding: 'utf8' })
}

describe('Prometheus rules', () => {
  it('promtool check rules passes', () => {
    const r = promtool(['check', 'rules', 'alerts.yml'])
    expect(r.status, r.stdout + r.stderr).toBe(0)
    expect(r.stdout).toContain(`SUCCESS: ${allRules().length} rules found`)
  })

  it('promtool test rules passes', () => {
    const r = promtool(['test', 'rules', 'alerts.test.yml'])
    expect(r.status, r.stdout + r.stderr).toBe(0)
  }, 60_000)

  it('every alert has a test case that expects it to fire', () => {
    const tests = parse(readFileSync(`${PROM_DIR}alerts.test.yml`, 'utf8')) as {
      tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[]
    }
    const firing = new Set(
      tests.tests.flatMap((t) =>
        (t.alert_rule_test ?? []).filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname),
      ),
    )
    for (const rule of allRules()) expect(firing.has(rule.alert), rule.alert).toBe(true)
  })

  it('promtool test rules fails when an expectation is wrong (the check is real)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kunci-promtool-'))
    try {
      copyFileSync(`${PROM_DIR}alerts.yml`, join(dir, 'alerts.yml'))
      const text = readFileSync(`${PROM_DIR}alerts.test.yml`, 'utf8')
      writeFileSync(join(dir, 'ok.test.yml'), text)
      writeFileSync(join(dir, 'broken.test.yml'), text.replace('severity: critical', 'severity: warning'))
      expect(spawnSync('promtool', ['test', 'rules', 'ok.test.yml'], { cwd: dir }).status).toBe(0)
      const broken = spawnSync('promtool', ['test', 'rules', 'broken.test.yml'], {
        cwd: dir,
        encoding: 'utf8',
      })
      expect(broken.status).not.toBe(0)
      expect(broken.stdout + broken.stderr).toContain('FAILED')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})
