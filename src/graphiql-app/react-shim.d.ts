// TEMPORARY: package.json has no @types/react / @types/react-dom, so these few declarations
// let `tsc -p tsconfig.json` check this folder. Delete this file once
// `@types/react@^19` and `@types/react-dom@^19` are devDependencies: the real types then
// also check GraphiQL's props, which these cannot.
declare module 'react/jsx-runtime' {
  export namespace JSX {
    type Element = unknown;
    interface ElementChildrenAttribute {
      children: unknown;
    }
    interface IntrinsicElements {
      [element: string]: { className?: string; children?: unknown; [attribute: string]: unknown };
    }
  }
  export const Fragment: unknown;
  export function jsx(type: unknown, props: unknown, key?: unknown): JSX.Element;
  export function jsxs(type: unknown, props: unknown, key?: unknown): JSX.Element;
}

declare module 'react-dom/client' {
  export interface Root {
    render(children: unknown): void;
    unmount(): void;
  }
  export function createRoot(container: Element): Root;
}
