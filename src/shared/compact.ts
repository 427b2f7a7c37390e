/** The object without its undefined fields (what a status written to the apiserver should hold). Pure. */
export function compact<T extends object>(obj: T): T {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined)) as T;
}
