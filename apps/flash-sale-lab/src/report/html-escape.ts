// The report's one HTML escape: every value the report, its money card and its room comparison
// write into markup or attributes goes through it.
const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
}

export const esc = (s: unknown): string => String(s).replace(/[&<>"']/g, (ch) => ESCAPES[ch]!)
