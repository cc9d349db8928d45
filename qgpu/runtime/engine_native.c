/* One decode step of the sparse engine (qgpu/runtime/engine.py) in one call
   (bound and compiled by engine_native.py), for a CPU.

   The mathematics and the rounding points are Engine.forward's for one token per sequence,
   operation by operation; only the dispatch of ~6,600 small PyTorch operations a step is gone,
   and a product visits only the weight columns whose input is not zero (a zero input adds
   0 x weight = 0 to every sum). Sums run in float32 in another order than PyTorch's, which the
   numerics contract makes exact (docs/ARCHITECTURE.md §3); tests/runtime/test_engine.py checks
   tokens and every bank's state against the stock path after every token.

   Compiled without contraction (-ffp-contract=off): every product and sum rounds on its own,
   as PyTorch's separate operations do. Values of the model dtype are held as float32; rd()
   rounds to bfloat16 (nearest even) where the stock path rounds to the model dtype.

   Layouts: activations [dims][batch] (the batch contiguous); the conv state
   [mixing channels][batch][taps - 1]; the delta rule's state [heads][dk][batch][channels]. */

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct { /* a matrix by columns: column c's entries [ptr[c], ptr[c+1]) */
    const int32_t *ptr;
    const uint32_t *packed; /* row << 16 | the value's bfloat16 bits (every value exact in
                               bfloat16, < 65,536 rows: half the bytes to stream); or NULL and */
    const int32_t *idx;     /* the rows and */
    const float *val;       /* the values */
    int32_t rows, cols;
} Csc;

typedef struct {
    int32_t heads, channels, mixing, neurons;
    const float *input_scale, *post_scale; /* (1 + w) on the circuit dims; NULL: 1 */
    Csc proj, out, gate_up, down;
    const int32_t *mix_rows; /* the conv's mixing channels (rows of proj) */
    const float *taps;       /* [mixing][taps] */
    const float *decay;      /* [heads], the constant exp(g); NULL: exactly 1 */
    const float *norm_weight;
} Layer;

typedef struct {
    int32_t layers, dims, dk, dv, taps, bf16, first_id, vocab, diffs, selected;
    float eps, width, q_scale;
    const Layer *layer;
    const float *embed_base;     /* [dims] */
    const int64_t *embed_cols;   /* [vocab][diffs] */
    const float *embed_vals;     /* [vocab][diffs] */
    const int64_t *select_dims;  /* [selected] */
    const float *select_scale;   /* [dims] or NULL */
    Csc select;                  /* [vocab][selected] */
} Model;

static inline float rd(float x, int bf16) {
    if (!bf16) return x;
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t even = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    u = (u & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : even; /* NaN as c10::BFloat16 */
    memcpy(&x, &u, 4);
    return x;
}

/* exp(-x) only where it decides a value; elsewhere the value any exp gives: for x >= 17,
   exp(-x) < 2^-24 and 1 + exp(-x) rounds to 1; for x <= -89, exp(-x) overflows to inf (as
   PyTorch's does), so x / (1 + exp(-x)) is -0 and 1 / (1 + exp(-x)) is 0. Most of the
   circuit's gates sit at 0, 32 or -96 and below: silu(x) is x itself (x >= 17 or 0) or -0
   (x <= -89), with no exp. */
static inline int silu_plain(float x) { return (x >= 17.0f) | (x == 0.0f); }
static inline int silu_off(float x) { return x <= -89.0f; }

static inline float silu(float x) {
    if (silu_plain(x)) return x;
    if (silu_off(x)) return -0.0f;
    return x / (1.0f + expf(-x));
}

/* out = rd(rd(silu(x)) * (up ? up : 1)) over n values of the model dtype: one pass the
   compiler vectorises for the values that need no exp, then exp for the others, if any. */
static void silu_all(const float *x, const float *up, size_t n, int bf16, float *out) {
    int rest = 0;
    for (size_t i = 0; i < n; i++) {
        float g = x[i];
        int off = silu_off(g);
        rest |= !(silu_plain(g) | off);
        float a = off ? -0.0f : g;
        out[i] = up ? rd(a * up[i], bf16) : a;
    }
    if (rest)
        for (size_t i = 0; i < n; i++)
            if (!(silu_plain(x[i]) | silu_off(x[i]))) {
                float a = rd(silu(x[i]), bf16);
                out[i] = up ? rd(a * up[i], bf16) : a;
            }
}

static inline float sigmoid(float x) {
    if (x >= 17.0f) return 1.0f;
    if (x <= -89.0f) return 0.0f;
    return 1.0f / (1.0f + expf(-x));
}

/* Qwen3_5RMSNorm over the merged width (base dims are 0): x = rd(h * rsqrt(mean) * scale). */
static void rms_factors(const Model *m, const float *h, int B, float *r) {
    for (int b = 0; b < B; b++) r[b] = 0.0f;
    for (int d = 0; d < m->dims; d++)
        for (int b = 0; b < B; b++) {
            float v = h[d * B + b];
            float sq = v * v;
            r[b] += sq;
        }
    for (int b = 0; b < B; b++) r[b] = 1.0f / sqrtf(r[b] / m->width + m->eps);
}

static void norm(const Model *m, const float *h, const float *scale, int B, float *r, float *x) {
    rms_factors(m, h, B, r);
    for (int d = 0; d < m->dims; d++)
        for (int b = 0; b < B; b++) {
            float v = h[d * B + b] * r[b];
            if (scale) v = v * scale[d];
            x[d * B + b] = rd(v, m->bf16);
        }
}

/* W's entry p: its row and value. */
static inline __attribute__((always_inline)) void entry(const Csc *w, int packed, int32_t p,
                                                        int32_t *row, float *v) {
    if (packed) {
        uint32_t e = w->packed[p], bits = e << 16;
        *row = (int32_t)(e >> 16);
        memcpy(v, &bits, 4);
    } else {
        *row = w->idx[p];
        *v = w->val[p];
    }
}

/* y += W x over [rows][B], visiting only the columns whose input is not all zero. */
static inline __attribute__((always_inline)) void accumulate(const Csc *w, int packed,
                                                             const float *x, int B, float *y) {
    if (B == 1) {
        for (int c = 0; c < w->cols; c++) {
            float xc = x[c];
            if (xc == 0.0f) continue;
            for (int32_t p = w->ptr[c]; p < w->ptr[c + 1]; p++) {
                int32_t row;
                float v;
                entry(w, packed, p, &row, &v);
                float t = v * xc;
                y[row] += t;
            }
        }
        return;
    }
    for (int c = 0; c < w->cols; c++) {
        const float *xc = x + (size_t)c * B;
        int any = 0;
        for (int b = 0; b < B; b++) any |= xc[b] != 0.0f;
        if (!any) continue;
        for (int32_t p = w->ptr[c]; p < w->ptr[c + 1]; p++) {
            int32_t row;
            float v;
            entry(w, packed, p, &row, &v);
            float *yr = y + (size_t)row * B;
            for (int b = 0; b < B; b++) {
                float t = v * xc[b];
                yr[b] += t;
            }
        }
    }
}

/* y = rd(W x) over [rows][B]. */
__attribute__((noinline)) static void product(const Csc *w, const float *x, int B, int bf16,
                                              float *y) {
    memset(y, 0, sizeof(float) * (size_t)w->rows * B);
    if (w->packed) accumulate(w, 1, x, B, y);
    else accumulate(w, 0, x, B, y);
    if (bf16)
        for (size_t i = 0; i < (size_t)w->rows * B; i++) y[i] = rd(y[i], 1);
}

static void residual_add(float *h, const float *y, int n, int bf16) {
    for (int i = 0; i < n; i++) h[i] = rd(h[i] + y[i], bf16);
}

/* Qwen3_5GatedDeltaNet, one token per sequence, on the kept heads and channels; adds its
   output to h. */
static void gdn(const Model *m, const Layer *L, float *h, float *conv, float *S, int B,
                float *work) {
    const int nh = L->heads, nc = L->channels, dk = m->dk, bf = m->bf16, K = m->dims;
    const int nqkv = nh * (2 * dk + nc);
    float *r = work, *x = r + B, *y = x + (size_t)K * B;
    float *normed = y + (size_t)L->proj.rows * B, *o = normed + (size_t)nh * nc * B;
    float *qn = o + (size_t)K * B, *kn = qn + dk, *kv = kn + dk, *core = kv + nc;

    norm(m, h, L->input_scale, B, r, x);
    product(&L->proj, x, B, bf, y);

    /* the causal conv on the mixing channels; the others pass their input */
    const int w = m->taps - 1;
    for (int i = 0; i < L->mixing; i++) {
        const float *tap = L->taps + (size_t)i * m->taps;
        float *row = y + (size_t)L->mix_rows[i] * B;
        for (int b = 0; b < B; b++) {
            float *past = conv + ((size_t)i * B + b) * w;
            float fresh = row[b], acc = 0.0f;
            for (int t = 0; t < w; t++) {
                float p = past[t] * tap[t];
                acc += p;
            }
            float p = fresh * tap[w];
            acc += p;
            for (int t = 0; t + 1 < w; t++) past[t] = past[t + 1];
            if (w) past[w - 1] = fresh;
            row[b] = rd(acc, bf);
        }
    }
    silu_all(y, NULL, (size_t)nqkv * B, bf, y);

    const float *zrows = y + (size_t)nqkv * B, *brows = zrows + (size_t)nh * nc * B;
    for (int b = 0; b < B; b++)
        for (int hd = 0; hd < nh; hd++) {
            /* l2-normalised q (then scaled) and k */
            float sq = 0.0f, sk = 0.0f;
            for (int j = 0; j < dk; j++) {
                float q = y[((size_t)hd * dk + j) * B + b], k = y[((size_t)(nh + hd) * dk + j) * B + b];
                float q2 = q * q, k2 = k * k;
                sq += q2;
                sk += k2;
            }
            float rq = 1.0f / sqrtf(sq + 1e-6f), rk = 1.0f / sqrtf(sk + 1e-6f);
            for (int j = 0; j < dk; j++) {
                float qv = y[((size_t)hd * dk + j) * B + b] * rq;
                qn[j] = qv * m->q_scale;
                kn[j] = y[((size_t)(nh + hd) * dk + j) * B + b] * rk;
            }
            float beta = rd(sigmoid(brows[(size_t)hd * B + b]), bf);
            float *Sh = S + ((size_t)hd * dk * B + b) * nc; /* row j at + j * B * nc */
            const size_t step = (size_t)B * nc;
            if (L->decay)
                for (int j = 0; j < dk; j++)
                    for (int c = 0; c < nc; c++) Sh[j * step + c] = Sh[j * step + c] * L->decay[hd];
            for (int c = 0; c < nc; c++) kv[c] = 0.0f;
            for (int j = 0; j < dk; j++) {
                if (kn[j] == 0.0f) continue; /* 0 x a finite row adds 0 */
                for (int c = 0; c < nc; c++) {
                    float p = Sh[j * step + c] * kn[j];
                    kv[c] += p;
                }
            }
            const float *v = y + (size_t)(2 * nh * dk + hd * nc) * B + b;
            for (int c = 0; c < nc; c++) {
                float d = v[(size_t)c * B] - kv[c];
                kv[c] = d * beta; /* kv now holds delta */
            }
            for (int j = 0; j < dk; j++) {
                if (kn[j] == 0.0f) continue;
                for (int c = 0; c < nc; c++) {
                    float p = kn[j] * kv[c];
                    Sh[j * step + c] += p;
                }
            }
            for (int c = 0; c < nc; c++) core[c] = 0.0f;
            for (int j = 0; j < dk; j++) {
                if (qn[j] == 0.0f) continue;
                for (int c = 0; c < nc; c++) {
                    float p = Sh[j * step + c] * qn[j];
                    core[c] += p;
                }
            }
            /* Qwen3_5RMSNormGated over the whole head (the channels not kept are 0) */
            float var = 0.0f;
            for (int c = 0; c < nc; c++) {
                core[c] = rd(core[c], bf);
                float c2 = core[c] * core[c];
                var += c2;
            }
            float rn = 1.0f / sqrtf(var / (float)m->dv + m->eps);
            for (int c = 0; c < nc; c++) {
                float xn = rd(core[c] * rn, bf);
                float t = rd(L->norm_weight[c] * xn, bf);
                float g = silu(zrows[((size_t)hd * nc + c) * B + b]);
                normed[((size_t)hd * nc + c) * B + b] = rd(t * g, bf);
            }
        }
    product(&L->out, normed, B, bf, o);
    residual_add(h, o, K * B, bf);
}

static void mlp(const Model *m, const Layer *L, float *h, int B, float *work) {
    const int N = L->neurons, K = m->dims, bf = m->bf16;
    float *r = work, *x = r + B, *gu = x + (size_t)K * B, *o = gu + (size_t)2 * N * B;
    float *act = o + (size_t)K * B;
    norm(m, h, L->post_scale, B, r, x);
    product(&L->gate_up, x, B, bf, gu);
    silu_all(gu, gu + (size_t)N * B, (size_t)N * B, bf, act);
    product(&L->down, act, B, bf, o);
    residual_add(h, o, K * B, bf);
}

/* The greedy choice so far: the first of equal maxima; a NaN is the maximum (as max). */
static inline void pick(float l, int v, float *top, int32_t *best) {
    int take = (*best < 0) | (l > *top) | ((l != l) & (*top == *top));
    *top = take ? l : *top;
    *best = take ? v : *best;
}

/* pick() over logits l[0, v1 - v0) of tokens v0.. of one sequence: their maximum in 16
   independent lanes (a loop the compiler vectorises), then its first token. */
static void pick_one(const float *l, int v0, int v1, float *top, int32_t *best) {
    float lane[16];
    int n = v1 - v0, nan = 0, i = 0;
    for (int k = 0; k < 16; k++) lane[k] = l[0];
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++) {
            float x = l[i + k];
            nan |= x != x;
            lane[k] = x > lane[k] ? x : lane[k];
        }
    float most = lane[0];
    for (int k = 1; k < 16; k++) most = lane[k] > most ? lane[k] : most;
    for (; i < n; i++) {
        nan |= l[i] != l[i];
        most = l[i] > most ? l[i] : most;
    }
    if (nan) { /* the first NaN, if the choice so far is not one */
        for (i = 0; i < n; i++) pick(l[i], v0 + i, top, best);
        return;
    }
    if (*best >= 0 && !(most > *top)) return;
    for (i = 0; l[i] != most; i++) {}
    pick(l[i], v0 + i, top, best);
}

enum { HEAD_SLICE = 1 << 16 };
/* The tied head and the greedy choice over the circuit tokens, HEAD_SLICE / B tokens at a
   time: the live dims' columns add into a [tokens][batch] slice that stays in the cache (256
   KB), and the slice is picked from before the next. cursor: `selected` ints; slice:
   HEAD_SLICE + B floats. */
static void head(const Model *m, const float *xs, int B, int32_t *cursor, float *slice,
                 float *top, int32_t *best) {
    const Csc *w = &m->select;
    for (int c = 0; c < w->cols; c++) cursor[c] = w->ptr[c];
    for (int b = 0; b < B; b++) best[b] = -1;
    const int block = B < HEAD_SLICE ? HEAD_SLICE / B : 1;
    for (int v0 = 0; v0 < m->vocab; v0 += block) {
        int v1 = v0 + block < m->vocab ? v0 + block : m->vocab;
        memset(slice, 0, sizeof(float) * (size_t)(v1 - v0) * B);
        for (int c = 0; c < w->cols; c++) {
            const float *xc = xs + (size_t)c * B;
            int any = 0;
            for (int b = 0; b < B; b++) any |= xc[b] != 0.0f;
            if (!any) continue; /* a zero input adds 0 to every logit */
            int32_t p = cursor[c], end = w->ptr[c + 1];
            if (B == 1)
                for (; p < end && w->idx[p] < v1; p++) {
                    float t = w->val[p] * xc[0];
                    slice[w->idx[p] - v0] += t;
                }
            else
                for (; p < end && w->idx[p] < v1; p++) {
                    float v = w->val[p], *yr = slice + (size_t)(w->idx[p] - v0) * B;
                    for (int b = 0; b < B; b++) {
                        float t = v * xc[b];
                        yr[b] += t;
                    }
                }
            cursor[c] = p;
        }
        if (m->bf16)
            for (size_t i = 0; i < (size_t)(v1 - v0) * B; i++) slice[i] = rd(slice[i], 1);
        if (B == 1)
            pick_one(slice, v0, v1, top, best);
        else
            for (int v = v0; v < v1; v++)
                for (int b = 0; b < B; b++)
                    pick(slice[(size_t)(v - v0) * B + b], v, top + b, best + b);
    }
}

size_t qgpu_step_work(const Model *m, int B) {
    size_t most = ((size_t)m->selected + 3) * B + HEAD_SLICE + m->selected;
    for (int i = 0; i < m->layers; i++) {
        const Layer *L = m->layer + i;
        size_t g = (size_t)B * (1 + 2 * m->dims + L->proj.rows + L->heads * L->channels)
                   + 2 * m->dk + 2 * L->channels;
        size_t f = (size_t)B * (1 + 2 * m->dims + 3 * L->neurons);
        if (g > most) most = g;
        if (f > most) most = f;
    }
    return most + (size_t)B * m->dims + B;
}

/* One token per sequence: ids [B] (circuit tokens), the state of every layer, updated in
   place; writes each sequence's greedy choice (a token id; 0, the first text token, when no
   circuit token's logit is above 0) and, unless NULL, every layer's output to
   outputs [layers][dims][B]. work: qgpu_step_work(m, B) floats. */
void qgpu_step(const Model *m, const int64_t *ids, int B, float *const *conv,
               float *const *state, int64_t *chosen, float *outputs, float *work) {
    const int K = m->dims, bf = m->bf16;
    float *h = work, *r = h + (size_t)K * B, *rest = r + B;
    for (int b = 0; b < B; b++) {
        int64_t t = ids[b] - m->first_id;
        for (int d = 0; d < K; d++) h[d * B + b] = m->embed_base[d];
        for (int i = 0; i < m->diffs; i++) {
            size_t at = (size_t)t * m->diffs + i;
            h[m->embed_cols[at] * B + b] += m->embed_vals[at];
        }
    }
    for (size_t i = 0; i < (size_t)K * B; i++) h[i] = rd(h[i], bf);
    for (int i = 0; i < m->layers; i++) {
        const Layer *L = m->layer + i;
        if (L->heads) gdn(m, L, h, conv[i], state[i], B, rest);
        if (L->neurons) mlp(m, L, h, B, rest);
        if (outputs) memcpy(outputs + (size_t)i * K * B, h, sizeof(float) * (size_t)K * B);
    }
    /* the final norm on the selection dims and the tied head over the circuit tokens */
    rms_factors(m, h, B, r);
    float *xs = rest, *top = xs + (size_t)m->selected * B, *slice = top + 2 * B;
    int32_t *best = (int32_t *)(top + B), *cursor = (int32_t *)(slice + HEAD_SLICE + B);
    for (int i = 0; i < m->selected; i++) {
        int64_t d = m->select_dims[i];
        for (int b = 0; b < B; b++) {
            float v = h[d * B + b] * r[b];
            if (m->select_scale) v = v * m->select_scale[d];
            xs[i * B + b] = rd(v, bf);
        }
    }
    head(m, xs, B, cursor, slice, top, best);
    for (int b = 0; b < B; b++) chosen[b] = top[b] > 0.0f ? m->first_id + best[b] : 0;
}
