/**
 * The part of the keys view that a reload or a shared link restores: the prefix and the Live
 * toggle, kept in the URL's fragment. The fragment is never sent to the server (so key names stay
 * out of its access log), and nothing else goes there: the bucket id and the credential stay in
 * sessionStorage (session.ts), since a bucket without keys is opened by its id alone.
 */
export interface ViewState {
  prefix?: string;
  live: boolean;
}

/** Reads the view state from `location.hash` (`#prefix=users%2F&live=1`); anything else is ignored. */
export function savedViewState(): ViewState {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  const prefix = params.get('prefix');
  return { ...(prefix !== null && { prefix }), live: params.get('live') === '1' };
}

/** Writes the view state into the URL without adding a history entry or reloading. */
export function saveViewState(state: ViewState): void {
  const params = new URLSearchParams();
  if (state.prefix) params.set('prefix', state.prefix);
  if (state.live) params.set('live', '1');
  const hash = params.toString();
  const url = `${location.pathname}${location.search}${hash ? `#${hash}` : ''}`;
  if (url !== `${location.pathname}${location.search}${location.hash}`) history.replaceState(history.state, '', url);
}
