const TRUE = ['1', 'true', 'yes', 'on'];
const FALSE = ['0', 'false', 'no', 'off'];

/**
 * The one reading of a boolean setting given as text (an environment variable, `--access-log on`):
 * 1/0, true/false, yes/no, on/off in any case. Anything else throws, naming the setting, so a typo
 * never silently turns an option on (`KVB_REQUIRE_SECRET_KEY=0` used to).
 */
export function parseBooleanSetting(name: string, value: string): boolean {
  const word = value.trim().toLowerCase();
  if (TRUE.includes(word)) return true;
  if (FALSE.includes(word)) return false;
  throw new Error(`${name} must be one of 1/0, true/false, yes/no, on/off, not ${JSON.stringify(value)}`);
}
