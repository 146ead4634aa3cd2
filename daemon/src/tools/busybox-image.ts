/**
 * Writes a docker-archive tarball of a busybox image made from /bin/busybox:
 *
 *   node daemon/dist/src/tools/busybox-image.js busybox.tar [--tag NAME:TAG] && docker load -i busybox.tar
 */
import { buildBusyboxArchive } from '../../test/fixtures/busybox.js';

async function main(argv: string[]): Promise<void> {
  let file: string | undefined;
  let tag: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--tag') tag = argv[++i];
    else if (argv[i] === '-h' || argv[i] === '--help') {
      process.stdout.write('usage: busybox-image FILE.tar [--tag NAME:TAG]\n');
      return;
    } else file = argv[i];
  }
  if (!file) throw new Error('usage: busybox-image FILE.tar [--tag NAME:TAG]');
  await buildBusyboxArchive(file, { tag });
}

main(process.argv.slice(2)).catch((err: Error) => {
  process.stderr.write(`busybox-image: ${err.message}\n`);
  process.exit(1);
});
