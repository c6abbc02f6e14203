// Builds the UI into the directory the quartermaster binary serves (scripts/build.sh passes
// --outDir build/web). No dev server or Node.js is needed at run time.
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'react' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 1024,
  },
});
