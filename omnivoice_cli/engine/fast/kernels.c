/* The int8 body's work between its products, as few passes over memory as the math allows
 * (engine/fast/kernels.py builds this file once per CPU target and compiler, caches the library,
 * and calls it through ctypes; engine/fast/fusedpath.py is the layer forward that uses it).
 *
 * Each function is one step of narrow.py's layer forward computed in one or two passes instead of
 * five to ten torch ops, parallel over rows with OpenMP (torch's own libgomp: the threads are
 * torch's). Built with -ffp-contract=off: every product and sum is rounded as torch's separate ops
 * round it (no fused multiply-add), so the quantisation is bit for bit int8pack.quantize_activations'
 * on the same values. The sums of squares are taken in another order than torch's reductions: a
 * norm may differ from torch's in the last bit.
 *
 * The codes: symmetric per tensor around half + 1, code = round(v / scale) + half + 1, scale =
 * max(max|v|, 1e-30) / half (in double, as Python computes it), v / scale computed as
 * v * (float)(1 / scale), rounded ties-to-even by adding 1.5 * 2^23 + half + 1 and keeping the low
 * byte of the sum's bits (int8pack._ROUNDER).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#define ROUNDER 12582912.0f /* 1.5 * 2^23 */
#define OV_MAX(a, b) ((b) > (a) ? (b) : (a)) /* NaNs ignored (fmaxf is a library call) */

int ov_version(void) { return 1; }

static inline uint8_t code_of(float v, float inv, float shift) {
    float s = v * inv;
    s = s + shift;
    uint32_t bits;
    memcpy(&bits, &s, 4);
    return (uint8_t)bits;
}

static inline float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* round to nearest even, as torch's fp32 -> bf16 cast (a NaN stays a quiet NaN) */
static inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded); /* branch-free: vectorised */
}

/* dst[j] = bf16(src[j]), j < d: with AVX512-BF16, its conversion instruction (round to nearest even;
 * it reads denormal inputs as zero: a bf16 q or k that small is zero to the attention anyway) */
static inline void store_bf16(uint16_t *dst, const float *src, int64_t d) {
    int64_t j = 0;
#if defined(__AVX512BF16__)
    for (; j + 16 <= d; j += 16) {
        __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + j));
        _mm256_storeu_si256((__m256i *)(dst + j), (__m256i)v);
    }
#endif
#pragma omp simd
    for (int64_t k = j; k < d; k++) dst[k] = f32_to_bf16(src[k]);
}

static double scale_of(float absmax, int half) {
    double m = absmax > 1e-30 ? (double)absmax : 1e-30;
    return m / half;
}

/* the sum of squares of one row x [d] */
static inline float sum_squares(const float *x, int64_t d) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < d; j++) s += x[j] * x[j];
    return s;
}

/* RMSNorm then the codes: x [n, d] (rows ldx apart) -> codes [n, d] dense; y = (x * r) * w with
 * r = inv[i], the rows' 1 / sqrt(sum(x^2) / d + eps) as torch computes it (so that the codes are
 * the torch ops' bit for bit). The scale in *scale. */
void ov_rms_norm_quantize(const float *x, int64_t n, int64_t d, int64_t ldx, const float *w, int half, uint8_t *codes,
                          const float *inv, double *scale, int threads) {
    float absmax = 0.0f;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(max : absmax)
    for (int64_t i = 0; i < n; i++) {
        const float *xi = x + i * ldx;
        float r = inv[i];
        float m = 0.0f;
#pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < d; j++) {
            float y = (xi[j] * r) * w[j];
            m = OV_MAX(m, fabsf(y));
        }
        absmax = OV_MAX(absmax, m);
    }
    double sc = scale_of(absmax, half);
    float q = (float)(1.0 / sc), shift = ROUNDER + (float)(half + 1);
    *scale = sc;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const float *xi = x + i * ldx;
        uint8_t *ci = codes + i * d;
        float r = inv[i];
#pragma omp simd
        for (int64_t j = 0; j < d; j++) ci[j] = code_of((xi[j] * r) * w[j], q, shift);
    }
}

/* max |x| over x [n, d] (rows ldx apart; fp32, or bf16 when bf16 != 0), NaNs ignored */
static float absmax_rows(const void *x, int bf16, int64_t n, int64_t d, int64_t ldx, int threads) {
    const float *xf = (const float *)x;
    const uint16_t *xh = (const uint16_t *)x;
    float absmax = 0.0f;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(max : absmax)
    for (int64_t i = 0; i < n; i++) {
        float m = 0.0f;
        if (bf16) {
#pragma omp simd reduction(max : m)
            for (int64_t j = 0; j < d; j++) m = OV_MAX(m, fabsf(bf16_to_f32(xh[i * ldx + j])));
        } else {
#pragma omp simd reduction(max : m)
            for (int64_t j = 0; j < d; j++) m = OV_MAX(m, fabsf(xf[i * ldx + j]));
        }
        absmax = OV_MAX(absmax, m);
    }
    return absmax;
}

/* The codes of x [n, d] (rows ldx apart; fp32, or bf16 when bf16 != 0) -> codes [n, d] dense. */
void ov_quantize(const void *x, int bf16, int64_t n, int64_t d, int64_t ldx, int half, uint8_t *codes, double *scale,
                 int threads) {
    const float *xf = (const float *)x;
    const uint16_t *xh = (const uint16_t *)x;
    double sc = scale_of(absmax_rows(x, bf16, n, d, ldx, threads), half);
    float q = (float)(1.0 / sc), shift = ROUNDER + (float)(half + 1);
    *scale = sc;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint8_t *ci = codes + i * d;
        if (bf16) {
#pragma omp simd
            for (int64_t j = 0; j < d; j++) ci[j] = code_of(bf16_to_f32(xh[i * ldx + j]), q, shift);
        } else {
#pragma omp simd
            for (int64_t j = 0; j < d; j++) ci[j] = code_of(xf[i * ldx + j], q, shift);
        }
    }
}

/* The MLP's gate: the codes of g * u, g and u [n, d] fp32 (rows ldg, ldu apart; g already through
 * its SiLU) -> codes [n, d] dense. */
void ov_mul_quantize(const float *g, int64_t ldg, const float *u, int64_t ldu, int64_t n, int64_t d, int half,
                     uint8_t *codes, double *scale, int threads) {
    float absmax = 0.0f;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(max : absmax)
    for (int64_t i = 0; i < n; i++) {
        const float *gi = g + i * ldg, *ui = u + i * ldu;
        float m = 0.0f;
#pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < d; j++) m = OV_MAX(m, fabsf(gi[j] * ui[j]));
        absmax = OV_MAX(absmax, m);
    }
    double sc = scale_of(absmax, half);
    float q = (float)(1.0 / sc), shift = ROUNDER + (float)(half + 1);
    *scale = sc;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const float *gi = g + i * ldg, *ui = u + i * ldu;
        uint8_t *ci = codes + i * d;
#pragma omp simd
        for (int64_t j = 0; j < d; j++) ci[j] = code_of(gi[j] * ui[j], q, shift);
    }
}

/* cw = cos * w and sw = sin * wr for one position (c, s its cos and sin rows) */
static inline void rope_weights(const float *c, const float *s, const float *w, const float *wr, int64_t d, float *cw,
                                float *sw) {
#pragma omp simd
    for (int64_t j = 0; j < d; j++) {
        cw[j] = c[j] * w[j];
        sw[j] = s[j] * wr[j];
    }
}

/* One head of one position: z = (y * cw + rotated(y) * sw) * r, r = 1 / sqrt(sum(y^2) / d + eps),
 * y [d] fp32, or bf16 when in_bf16 (widened into `wide`). */
static inline void norm_rope_head(const void *x, int in_bf16, const float *cw, const float *sw, int64_t d, float eps,
                                  float *wide, float *z) {
    int64_t half = d / 2;
    const float *y;
    if (in_bf16) {
        const uint16_t *yh = (const uint16_t *)x;
#pragma omp simd
        for (int64_t j = 0; j < d; j++) wide[j] = bf16_to_f32(yh[j]);
        y = wide;
    } else {
        y = (const float *)x;
    }
    float r = 1.0f / sqrtf(sum_squares(y, d) / (float)d + eps);
#pragma omp simd
    for (int64_t j = 0; j < half; j++) z[j] = (y[j] * cw[j] + y[j + half] * sw[j]) * r;
#pragma omp simd
    for (int64_t j = half; j < d; j++) z[j] = (y[j] * cw[j] + y[j - half] * sw[j]) * r;
}

/* q or k: RoPE(RMSNorm(x)) head-major. x [n, heads, d] fp32, or bf16 when in_bf16 != 0 (rows ldx
 * apart, heads d apart), cs [2, n, d] fp32 (cos then sin, dense), w [d] the norm's weight, wr [d]
 * its halves swapped with the first negated (narrow.rope_weights) -> out [heads, n, d], fp32 or bf16
 * (out_bf16 != 0): z = y * (cos * w) + rotated(y) * (sin * wr), times 1 / sqrt(sum(y^2) / d + eps),
 * computed in fp32. d <= 512. */
void ov_norm_rope(const void *x, int in_bf16, int64_t n, int64_t heads, int64_t d, int64_t ldx, const float *cs,
                  const float *w, const float *wr, float eps, void *out, int out_bf16, int threads) {
    size_t width = in_bf16 ? 2 : 4;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float cw[512], sw[512], z[512], wide[512];
        rope_weights(cs + i * d, cs + (n + i) * d, w, wr, d, cw, sw);
        for (int64_t h = 0; h < heads; h++) {
            norm_rope_head((const char *)x + (size_t)(i * ldx + h * d) * width, in_bf16, cw, sw, d, eps, wide, z);
            int64_t o = (h * n + i) * d;
            if (out_bf16) {
                store_bf16((uint16_t *)out + o, z, d);
            } else {
                memcpy((float *)out + o, z, (size_t)d * sizeof(float));
            }
        }
    }
}

/* The packed row of position i: starts[r] <= i < starts[r + 1] (rows + 1 starts, the last n) */
static inline int64_t row_of(const int64_t *starts, int64_t rows, int64_t i) {
    int64_t r = 0;
    while (r + 1 < rows && starts[r + 1] <= i) r++;
    return r;
}

/* The attention's inputs in each packed row's own blocks, from the qkv product in one pass:
 * y [n, (heads + 2 kv) d] fp32 (rows ldy apart: q | k | v), cs [2, n, d] (as ov_norm_rope's) ->
 * q [heads, L, d], k and v [kv, L, d] bf16 for each row r of length L = starts[r + 1] - starts[r],
 * its blocks at starts[r] * heads * d of q and starts[r] * kv * d of k and v: q and k as
 * ov_norm_rope's (qw, qwr, qeps; kw, kwr, keps), v rounded as torch rounds (f32_to_bf16). d <= 512. */
void ov_qkv_rows(const float *y, int64_t n, int64_t ldy, int64_t heads, int64_t kv, int64_t d, const float *cs,
                 const float *qw, const float *qwr, float qeps, const float *kw, const float *kwr, float keps,
                 const int64_t *starts, int64_t rows, uint16_t *q, uint16_t *k, uint16_t *v, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float cw[512], sw[512], z[512], wide[512];
        int64_t r = row_of(starts, rows, i), len = starts[r + 1] - starts[r], p = i - starts[r];
        const float *yi = y + i * ldy, *c = cs + i * d, *s = cs + (n + i) * d;
        rope_weights(c, s, qw, qwr, d, cw, sw);
        for (int64_t h = 0; h < heads; h++) {
            norm_rope_head(yi + h * d, 0, cw, sw, d, qeps, wide, z);
            store_bf16(q + starts[r] * heads * d + (h * len + p) * d, z, d);
        }
        rope_weights(c, s, kw, kwr, d, cw, sw);
        for (int64_t g = 0; g < kv; g++) {
            norm_rope_head(yi + (heads + g) * d, 0, cw, sw, d, keps, wide, z);
            store_bf16(k + starts[r] * kv * d + (g * len + p) * d, z, d);
            const float *vi = yi + (heads + kv + g) * d;
            uint16_t *vo = v + starts[r] * kv * d + (g * len + p) * d;
#pragma omp simd
            for (int64_t j = 0; j < d; j++) vo[j] = f32_to_bf16(vi[j]);
        }
    }
}

/* The attention's result coded for o_proj: o bf16 in ov_qkv_rows' q blocks ([heads, L, d] per row)
 * -> codes [n, heads * d] in position order, as ov_quantize's of the result laid out [n, heads, d]
 * (the same values: the same scale and codes, bit for bit). */
void ov_quantize_rows(const uint16_t *o, int64_t n, int64_t heads, int64_t d, const int64_t *starts, int64_t rows,
                      int half, uint8_t *codes, double *scale, int threads) {
    double sc = scale_of(absmax_rows(o, 1, n * heads, d, d, threads), half); /* the blocks: n * heads dense rows */
    float qs = (float)(1.0 / sc), shift = ROUNDER + (float)(half + 1);
    *scale = sc;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        int64_t r = row_of(starts, rows, i), len = starts[r + 1] - starts[r], p = i - starts[r];
        for (int64_t h = 0; h < heads; h++) {
            const uint16_t *src = o + starts[r] * heads * d + (h * len + p) * d;
            uint8_t *ci = codes + (i * heads + h) * d;
#pragma omp simd
            for (int64_t j = 0; j < d; j++) ci[j] = code_of(bf16_to_f32(src[j]), qs, shift);
        }
    }
}

/* RMSNorm of bf16 rows: x [n, d] bf16 (rows ldx apart), w [d] fp32 -> out [n, d] bf16 dense,
 * ((x * r) * w) computed in fp32 and rounded once, r = 1 / sqrt(sum(x^2) / d + eps). d <= 8192. */
void ov_rms_norm_bf16(const uint16_t *x, int64_t n, int64_t d, int64_t ldx, const float *w, float eps, uint16_t *out,
                      int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float wide[8192];
        const uint16_t *xi = x + i * ldx;
#pragma omp simd
        for (int64_t j = 0; j < d; j++) wide[j] = bf16_to_f32(xi[j]);
        float r = 1.0f / sqrtf(sum_squares(wide, d) / (float)d + eps);
#pragma omp simd
        for (int64_t j = 0; j < d; j++) wide[j] = (wide[j] * r) * w[j];
        store_bf16(out + i * d, wide, d);
    }
}

#if defined(__FMA__)
#define OV_FMA(a, b, c) fmaf(a, b, c) /* one instruction where the target has it */
#else
#define OV_FMA(a, b, c) ((a) * (b) + (c))
#endif

/* exp(x) for x <= 0 (a softmax's x - max): 2^n * e^r, n = round(x / ln 2), |r| <= ln 2 / 2, e^r by
 * its Taylor polynomial to r^6 (relative error under 3e-6, beside bf16's 4e-3 the probabilities are
 * rounded to); 0 below -87 (under fp32's normal range) */
static inline float exp_nonpositive(float x) {
    float t = x * 1.44269504088896341f;
    float n = (t + ROUNDER) - ROUNDER; /* round to nearest, as (ties to even) */
    float r = (x - n * 0.693359375f) - n * -2.12194440e-4f; /* ln 2 in two parts: n * hi is exact */
    float p = OV_FMA(1.0f / 720.0f, r, 1.0f / 120.0f);
    p = OV_FMA(p, r, 1.0f / 24.0f);
    p = OV_FMA(p, r, 1.0f / 6.0f);
    p = OV_FMA(p, r, 0.5f);
    p = OV_FMA(p, r, 1.0f);
    p = OV_FMA(p, r, 1.0f);
    int32_t e = (int32_t)n + 127;
    e = e < 1 ? 1 : e;
    uint32_t bits = (uint32_t)e << 23;
    float two_n;
    memcpy(&two_n, &bits, 4);
    return x < -87.0f ? 0.0f : p * two_n;
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__FMA__)
/* exp_nonpositive on 16 lanes: the same operations in the same order (so the same values) */
static inline __m512 exp_nonpositive16(__m512 x) {
    __m512 n = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _mm512_set1_ps(ROUNDER)),
                             _mm512_set1_ps(ROUNDER));
    __m512 r = _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(0.693359375f))),
                             _mm512_mul_ps(n, _mm512_set1_ps(-2.12194440e-4f)));
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.0f / 720.0f), r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i e = _mm512_max_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), _mm512_set1_epi32(1));
    __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(e, 23)));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_NLT_UQ), y); /* 0 below -87 */
}

/* 16 bf16 (the lanes of `m`) read as fp32 */
static inline __m512 load_bf16x16(const uint16_t *src, __mmask16 m) {
    __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, src));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

/* the lanes of `m` of v rounded to bf16 (as f32_to_bf16, or the conversion instruction) into dst */
static inline void store_bf16x16(uint16_t *dst, __m512 v, __mmask16 m) {
#if defined(__AVX512BF16__)
    __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
#else
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    __m256i h = _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet));
#endif
    _mm256_mask_storeu_epi16(dst, m, h);
}

/* the lanes of the 16 columns from j on that are inside a row of s */
static inline __mmask16 lanes16(int64_t s, int64_t j) {
    return s - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (s - j)) - 1);
}

/* one row of ov_softmax_bf16 (s <= 8192), 16 columns at a time; e: the row's exponentials */
static void softmax_row16(uint16_t *xi, int64_t s, float *e) {
    __m512 vm = _mm512_set1_ps(-INFINITY);
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd(); /* the sum in double, rounded once: all but order-free */
    for (int64_t j = 0; j < s; j += 16) {
        __mmask16 m = lanes16(s, j);
        vm = _mm512_mask_max_ps(vm, m, load_bf16x16(xi + j, m), vm); /* a NaN lane: the running max kept */
    }
    __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vm));
    for (int64_t j = 0; j < s; j += 16) {
        __mmask16 m = lanes16(s, j);
        __m512 v = _mm512_maskz_mov_ps(m, exp_nonpositive16(_mm512_sub_ps(load_bf16x16(xi + j, m), mx)));
        _mm512_storeu_ps(e + j, v);
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
    }
    __m512 inv = _mm512_set1_ps(1.0f / (float)_mm512_reduce_add_pd(_mm512_add_pd(lo, hi)));
    for (int64_t j = 0; j < s; j += 16) {
        __mmask16 m = lanes16(s, j);
        store_bf16x16(xi + j, _mm512_mul_ps(_mm512_loadu_ps(e + j), inv), m);
    }
}
#define OV_SOFTMAX16 1
#endif

/* softmax over each row of x [rows, s] bf16 (rows dense, s apart), in place: computed in fp32,
 * rounded once; the exponentials kept in a buffer of the row's (re-computed past 8192 columns).
 * AVX-512: 16 columns at a time (softmax_row16), the sum in double (as exact as fp32 holds it). */
void ov_softmax_bf16(uint16_t *x, int64_t rows, int64_t s, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < rows; i++) {
        uint16_t *xi = x + i * s;
        float e[8192 + 16];
#if defined(OV_SOFTMAX16)
        if (s <= 8192) {
            softmax_row16(xi, s, e);
            continue;
        }
#endif
        float m = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < s; j++) m = OV_MAX(m, bf16_to_f32(xi[j]));
        if (s <= 8192) {
#pragma omp simd reduction(+ : sum)
            for (int64_t j = 0; j < s; j++) {
                e[j] = exp_nonpositive(bf16_to_f32(xi[j]) - m);
                sum += e[j];
            }
            float inv = 1.0f / sum;
#pragma omp simd
            for (int64_t j = 0; j < s; j++) e[j] = e[j] * inv;
            store_bf16(xi, e, s);
        } else {
#pragma omp simd reduction(+ : sum)
            for (int64_t j = 0; j < s; j++) sum += exp_nonpositive(bf16_to_f32(xi[j]) - m);
            float inv = 1.0f / sum;
            for (int64_t j0 = 0; j0 < s; j0 += 8192) {
                int64_t len = s - j0 < 8192 ? s - j0 : 8192;
#pragma omp simd
                for (int64_t j = 0; j < len; j++) e[j] = exp_nonpositive(bf16_to_f32(xi[j0 + j]) - m) * inv;
                store_bf16(xi + j0, e, len);
            }
        }
    }
}
