/* An output file written through stdio, atomically, and the directory it
 * goes in. The steps are outcheck.h's: the open writes "<path>.tmp.<pid>",
 * the close with keep flushes and fsyncs it and renames it over path when
 * every write succeeded (a full disk leaves the previous file, never a
 * truncated one). */
#ifndef TF_FILEIO_OUTFILE_H
#define TF_FILEIO_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

/* The temporary file of path, open for writing; NULL with "<path>: ..." or
 * "cannot write '<tmp>': ..." in err. */
FILE *tf_io_open_out(const char *path, char *err, size_t errlen);
/* Closes f (from tf_io_open_out). With keep it is put at path when every
 * write succeeded, else removed, and -1 returned with err set; without keep
 * it is removed and 0 returned. */
int tf_io_close_out(FILE *f, const char *path, int keep, char *err, size_t errlen);

/* mkdir -p: dir and its missing parents; 0 when dir is a directory after,
 * else -1 with errno set. */
int tf_io_mkdir_p(const char *dir);

#endif
