import { renderDashboard } from './grafana/dashboard.js'
import { CONFIGS, type DeployConfig } from './k8s/config.js'
import { GENERATED_HEADER, renderManifests } from './k8s/manifests.js'
import { renderRules, renderScrapeConfig } from './prometheus/rules.js'

/** Every generated file, path relative to deploy/ → content. */
export function renderAll(overrides: Partial<DeployConfig> = {}): Map<string, string> {
  const out = new Map<string, string>()
  for (const base of CONFIGS) {
    const cfg = { ...base, ...overrides }
    for (const [file, text] of renderManifests(cfg)) out.set(`k8s/${cfg.env}/${file}`, text)
  }
  out.set('prometheus/alerts.yml', GENERATED_HEADER + renderRules())
  out.set('prometheus/prometheus.yml', GENERATED_HEADER + renderScrapeConfig(CONFIGS[0]!.namespace))
  out.set('grafana/kunci-flash-sale.json', renderDashboard())
  return out
}
