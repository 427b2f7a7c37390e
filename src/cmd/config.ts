/** `sandpit config`: every setting, its environment variables, default, current value and source. */
import { resolveConfig } from '../config/load.js';
import { describeSettings, type Setting } from '../config/settings.js';
import { parse, printHelp } from './args.js';
import { table } from './table.js';

export const CONFIG_USAGE = `
usage: sandpit config [--config PATH] [--json]

Prints every setting: its environment variables (SANDPIT_*, and the seed's where there is one),
its default, the value in effect and where that value came from (default, file, env). Secrets
(tokens, token digests) print as <set>. Precedence: defaults, the file, the seed's variables,
SANDPIT_* variables, command-line flags.

options:
      --config PATH   config file (YAML or JSON); also SANDPIT_CONFIG
      --json          one JSON object per setting, in an array
  -h, --help          this text
`;

export function configCommand(argv: string[]): number {
  const { values } = parse(argv, { config: { type: 'string' }, json: { type: 'boolean' } }, CONFIG_USAGE);
  if (values.help) {
    printHelp(CONFIG_USAGE);
    return 0;
  }
  const settings = describeSettings(
    resolveConfig({ env: process.env, ...(values.config ? { configPath: values.config } : {}) }),
  );
  process.stdout.write(values.json ? `${JSON.stringify(settings, null, 2)}\n` : settingsTable(settings));
  return 0;
}

function settingsTable(settings: readonly Setting[]): string {
  return table([
    ['SETTING', 'ENVIRONMENT', 'DEFAULT', 'VALUE', 'SOURCE'],
    ...settings.map((s) => [s.field, s.env.join(', '), s.default, s.value, s.source]),
  ]);
}
